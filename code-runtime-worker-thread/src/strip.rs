//! TypeScript in, JavaScript out: strip-only, position-preserving type erasure with
//! `swc_ts_fast_strip` (the engine behind Node's own type stripping), and the async-function
//! wrapper the program runs in.

use std::sync::{Arc, Mutex};

use swc_common::errors::{DiagnosticBuilder, Emitter, Handler};
use swc_common::sync::Lrc;
use swc_common::{GLOBALS, Globals, SourceMap, Spanned};
use swc_ts_fast_strip::{Mode, Options};

/// The largest program accepted, in bytes (a megabyte is far beyond what a model writes in one
/// turn). swc's parser and visitors recurse once per level of syntax nesting, and one byte can be
/// a level (`!!!!1`, `((((1`), so the stack the strip needs grows with the program; this bound
/// bounds it.
pub(crate) const MAX_PROGRAM_BYTES: usize = 1 << 20;

/// The strip's stack: a base, plus this much per byte of program. A level of nesting took
/// up to 2.7 KiB of stack in a debug build (measured on parentheses, `!`, arrows and generic
/// arrows at 3 000 levels); release builds take less. Only the pages a strip touches are ever
/// committed: the rest is address space.
const STACK_BASE: usize = 8 << 20;
const STACK_PER_BYTE: usize = 3 << 10;

/// What [`strip`] wraps the program in so that `await` and `return` parse; the wrapper is
/// position-preserving text around the body, removed again after the strip.
const PARSE_HEADER: &str = "(async function () {";
const PARSE_TRAILER: &str = "\n})";

/// The program's JavaScript body, with every position the program's own: line numbers match,
/// and the body starts at column 1 of line 1 of the program.
#[derive(Debug)]
pub(crate) struct Stripped {
    pub(crate) body: String,
}

/// Why a program could not be stripped: swc's diagnostic, with `line:column` in the program's own
/// coordinates, e.g. `TypeScript enum is not supported in strip-only mode (1:1)`. The program sees
/// it as its exception.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct StripError(String);

/// Strips the types from `program`, on a stack of its own whose size fits the program's (see
/// [`MAX_PROGRAM_BYTES`]): whatever the program nests, the strip cannot overflow a stack.
///
/// # Errors
///
/// A program over [`MAX_PROGRAM_BYTES`], or the first diagnostic of the stripper.
pub(crate) fn strip_program(program: &str) -> Result<Stripped, StripError> {
    if program.len() > MAX_PROGRAM_BYTES {
        return Err(StripError(format!(
            "the program is {} bytes long; at most {MAX_PROGRAM_BYTES} bytes are accepted",
            program.len()
        )));
    }
    let source = format!("{PARSE_HEADER}{program}{PARSE_TRAILER}");
    let stack = STACK_BASE + program.len() * STACK_PER_BYTE;
    // A stack of its own, on this thread: mapped fresh (with a guard page) for this strip and
    // unmapped after it. A thread of its own would do the same at the cost of starting it and of
    // waking a core for it, a few hundred microseconds when that core was idle.
    let stripped = stacker::grow(stack, || {
        std::panic::catch_unwind(|| strip(&source, PARSE_HEADER.len()))
            .unwrap_or_else(|_| Err(StripError("the type stripper failed".to_owned())))
    })?;
    // Strip-only mode replaces types with blanks and leaves every other byte where it was, so
    // the wrapper is still there, byte for byte.
    match stripped.strip_prefix(PARSE_HEADER).and_then(|rest| rest.strip_suffix(PARSE_TRAILER)) {
        Some(body) => Ok(Stripped { body: body.to_owned() }),
        None => Err(StripError("the type stripper moved the program's text".to_owned())),
    }
}

fn strip(source: &str, header_len: usize) -> Result<String, StripError> {
    let diagnostics = Arc::new(Mutex::new(Vec::new()));
    let source_map: Lrc<SourceMap> = Lrc::default();
    let emitter =
        Collect { source_map: source_map.clone(), header_len, found: diagnostics.clone() };
    let handler = Handler::with_emitter(true, false, Box::new(emitter));
    let options = Options { mode: Mode::StripOnly, module: Some(false), ..Options::default() };
    let outcome = GLOBALS.set(&Globals::new(), || {
        swc_ts_fast_strip::operate(&source_map, &handler, source.to_owned(), options)
    });
    match outcome {
        Ok(output) => Ok(output.code),
        Err(error) => {
            let found = diagnostics.lock().map(|found| found.clone()).unwrap_or_default();
            // The emitter's diagnostic says what and where; the error alone only says which kind.
            Err(StripError(found.into_iter().next().unwrap_or_else(|| error.message.clone())))
        }
    }
}

/// Collects swc's diagnostics as `message (line:column)` in program coordinates.
struct Collect {
    source_map: Lrc<SourceMap>,
    header_len: usize,
    found: Arc<Mutex<Vec<String>>>,
}

impl Emitter for Collect {
    fn emit(&mut self, diagnostic: &mut DiagnosticBuilder<'_>) {
        let message = diagnostic.message();
        let position = diagnostic.span.primary_span().map(|span| {
            let location = self.source_map.lookup_char_pos(span.span().lo);
            let column = if location.line == 1 {
                location.col.0.saturating_sub(self.header_len)
            } else {
                location.col.0
            };
            format!(" ({}:{})", location.line, column + 1)
        });
        if let Ok(mut found) = self.found.lock() {
            found.push(format!("{message}{}", position.unwrap_or_default()));
        }
    }
}

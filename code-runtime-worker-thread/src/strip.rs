//! TypeScript in, JavaScript out: strip-only, position-preserving type erasure with
//! `swc_ts_fast_strip` (the engine behind Node's own type stripping), and the async-function
//! wrapper the program runs in.

use std::sync::{Arc, Mutex};

use swc_common::errors::{DiagnosticBuilder, Emitter, Handler};
use swc_common::sync::Lrc;
use swc_common::{GLOBALS, Globals, SourceMap, Spanned};
use swc_ts_fast_strip::{Mode, Options};

/// The program wrapped as an async function expression, ready for V8: the header shares the
/// program's first line, so every line number is the program's own, and [`Wrapped::column_offset`]
/// corrects the columns of line 1.
#[derive(Debug)]
pub(crate) struct Wrapped {
    pub(crate) source: String,
    /// Subtract from columns on line 1 (V8's `ScriptOrigin` column offset).
    pub(crate) column_offset: i32,
}

/// Why a program could not be stripped: swc's diagnostic, with `line:column` in the program's own
/// coordinates, e.g. `TypeScript enum is not supported in strip-only mode (1:1)`. The program sees
/// it as its exception.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct StripError(String);

/// Strips the types from `program` and wraps it as
/// `(async function (<parameters>) {"use strict"; <program>\n})`.
///
/// # Errors
///
/// The first diagnostic of the stripper.
pub(crate) fn strip_and_wrap(program: &str, parameters: &[&str]) -> Result<Wrapped, StripError> {
    let header = format!("(async function ({}) {{\"use strict\";", parameters.join(", "));
    let source = format!("{header}{program}\n}})");
    let stripped = strip(&source, header.len())?;
    Ok(Wrapped { source: stripped, column_offset: -i32::try_from(header.len()).unwrap_or(0) })
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

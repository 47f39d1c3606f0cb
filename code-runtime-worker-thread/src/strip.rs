//! TypeScript in, JavaScript out: strip-only, position-preserving type erasure with
//! `swc_ts_fast_strip` (the engine behind Node's own type stripping), and the async-function
//! wrapper the program runs in. What erasure refuses (`enum`, `namespace`, parameter properties)
//! and decorators are compiled instead (`transform.rs`), with a map back to the program's
//! positions.

use std::sync::{Arc, Mutex};

use swc_common::errors::{DiagnosticBuilder, Emitter, Handler};
use swc_common::sync::Lrc;
use swc_common::{BytePos, GLOBALS, Globals, SourceMap, Spanned};
use swc_ecma_ast::{AutoAccessor, Decl, Decorator, Expr, Stmt};
use swc_ecma_parser::{EsSyntax, Parser, StringInput, Syntax, TsSyntax};
use swc_ecma_visit::{Visit, VisitWith};
use swc_ts_fast_strip::{ErrorCode, Mode, Options};

use crate::imports;
use crate::nesting;
use crate::program::NamespaceSetup;
use crate::transform::{self, Positions};

/// The largest program accepted, in bytes (a megabyte is far beyond what a model writes in one
/// turn). swc's parser and visitors recurse once per level of syntax nesting, and one byte can be
/// a level (`!!!!1`, `((((1`), so the stack the strip needs grows with the program; this bound
/// bounds it.
pub(crate) const MAX_PROGRAM_BYTES: usize = 1 << 20;

/// The longest program that is compiled rather than erased (one with an `enum`, a `namespace`,
/// a parameter property or a decorator). swc's transforms take time that grows faster than the
/// program (an `enum` after another: a megabyte of them took 35 s); at this length they take
/// well under a second.
pub(crate) const MAX_COMPILED_BYTES: usize = 128 << 10;

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
/// A compiled program's body has its own positions, and [`Positions`] to map them back (empty
/// for an erased one).
#[derive(Debug)]
pub(crate) struct Stripped {
    pub(crate) body: String,
    pub(crate) positions: Positions,
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
pub(crate) fn strip_program(
    program: &str,
    namespaces: &[NamespaceSetup],
    legacy_decorators: bool,
) -> Result<Stripped, StripError> {
    if program.len() > MAX_PROGRAM_BYTES {
        return Err(StripError(format!(
            "the program is {} bytes long; at most {MAX_PROGRAM_BYTES} bytes are accepted",
            program.len()
        )));
    }
    let program = imports::resolved(program, namespaces).map_err(StripError)?;
    // Before any parser: the parser recurses per level, and a stack sized for the length of a
    // program nested as deep as it is long would be committed whole.
    if let Some(at) = nesting::too_deep(&program, nesting::MAX_NESTING) {
        let line = program[..at].matches('\n').count() + 1;
        let column = program[..at].rsplit('\n').next().map_or(0, |text| text.chars().count()) + 1;
        return Err(StripError(format!(
            "the program nests more than {} levels deep ({line}:{column}): split the expression \
             or build deep values in a loop",
            nesting::MAX_NESTING
        )));
    }
    let source = format!("{PARSE_HEADER}{}{PARSE_TRAILER}", exported_default(&program));
    let stack = STACK_BASE + program.len() * STACK_PER_BYTE;
    // A stack of its own, on this thread: mapped fresh (with a guard page) for this strip and
    // unmapped after it. A thread of its own would do the same at the cost of starting it and of
    // waking a core for it, a few hundred microseconds when that core was idle.
    let (stripped, positions) = stacker::grow(stack, || {
        std::panic::catch_unwind(|| {
            let (code, positions) = match strip(&source, PARSE_HEADER.len())? {
                Some(code) if !needs_compiling(&code) => (code, Positions::default()),
                // Erasure refused it, or left decorators or auto-accessors V8 does not run:
                // compiled instead.
                _ if program.len() > MAX_COMPILED_BYTES => {
                    return Err(StripError(format!(
                        "the program is {} bytes long; TypeScript that needs compiling (an enum, \
                         a namespace, a parameter property, a decorator) may be at most \
                         {MAX_COMPILED_BYTES} bytes: use a const object for an enum, or split \
                         the program",
                        program.len()
                    )));
                }
                _ => {
                    let (body, positions) =
                        transform::compile(&source, PARSE_HEADER.len(), legacy_decorators)
                            .map_err(StripError)?;
                    (format!("{PARSE_HEADER}{body}{PARSE_TRAILER}"), positions)
                }
            };
            Ok((with_completion(code), positions))
        })
        .unwrap_or_else(|_| Err(StripError("the type stripper failed".to_owned())))
    })?;
    // Strip-only mode replaces types with blanks and leaves every other byte where it was, so
    // the wrapper is still there, byte for byte (and a compiled body was wrapped the same way).
    match stripped.strip_prefix(PARSE_HEADER).and_then(|rest| rest.strip_suffix(PARSE_TRAILER)) {
        Some(body) => Ok(Stripped { body: body.to_owned(), positions }),
        None => Err(StripError("the type stripper moved the program's text".to_owned())),
    }
}

/// Whether erased `code` still holds what V8 does not run yet: decorators, or auto-accessors
/// (`accessor x = 1`). Only a program with an `@` or the word `accessor` is parsed for them.
fn needs_compiling(code: &str) -> bool {
    struct Found(bool);
    impl Visit for Found {
        fn visit_decorator(&mut self, _: &Decorator) {
            self.0 = true;
        }
        fn visit_auto_accessor(&mut self, _: &AutoAccessor) {
            self.0 = true;
        }
    }
    if !(code.contains('@') || code.contains("accessor")) {
        return false;
    }
    let Some(end) = u32::try_from(code.len()).ok().and_then(|len| len.checked_add(1)) else {
        return false;
    };
    let syntax =
        Syntax::Es(EsSyntax { decorators: true, auto_accessors: true, ..EsSyntax::default() });
    let input = StringInput::new(code, BytePos(1), BytePos(end));
    let Ok(script) = Parser::new(syntax, input, None).parse_script() else { return false };
    let mut found = Found(false);
    script.visit_with(&mut found);
    found.0
}

/// `program` with an `export default` that begins it (after comments) blanked out (the same
/// number of spaces, so positions stay), leaving what it exported as the program's only
/// statement: a function to call, under [`with_completion`]'s rule.
fn exported_default(program: &str) -> std::borrow::Cow<'_, str> {
    const EXPORT_DEFAULT: &str = "export default";
    let mut start = 0;
    loop {
        let rest = &program[start..];
        let code = rest.trim_start();
        start += rest.len() - code.len();
        let skipped = if code.starts_with("//") {
            code.find('\n').unwrap_or(code.len())
        } else if code.starts_with("/*") {
            match code.find("*/") {
                Some(end) => end + 2,
                None => break,
            }
        } else {
            break;
        };
        start += skipped;
    }
    let rest = &program[start..];
    match rest.strip_prefix(EXPORT_DEFAULT) {
        Some(after) if after.starts_with(char::is_whitespace) => {
            let blank = " ".repeat(EXPORT_DEFAULT.len());
            format!("{}{blank}{after}", &program[..start]).into()
        }
        _ => program.into(),
    }
}

/// The stripped source (`PARSE_HEADER`, the program, `PARSE_TRAILER`) with the program's
/// completion made its value (docs/programs.md):
///
/// - a program that is one function (an arrow function or a function expression, `async` or
///   not, or a function declaration) is called: `return (` before it, `)()` after it;
/// - otherwise, when its last statement is an expression (but not an assignment or `x++`),
///   `return ` goes before that expression, so its value, or what its promise settles to, is the
///   result when no earlier `return` ran.
///
/// Text is only inserted, on the line of the statement, so every line keeps its number (the
/// columns after the insertion on that one line move by 7 or 8). Source that does not parse is
/// left as it is (V8 reports its error).
fn with_completion(source: String) -> String {
    let Some(edits) = completion_edits(&source) else { return source };
    let mut out = source;
    // From the end, so the earlier offset stays valid.
    for (offset, text) in edits.into_iter().rev() {
        out.insert_str(offset, text);
    }
    out
}

/// Where [`with_completion`] inserts what, in source order.
fn completion_edits(source: &str) -> Option<Vec<(usize, &'static str)>> {
    // Positions start at 1: swc keeps 0 for "no position".
    let end = u32::try_from(source.len()).ok()?.checked_add(1)?;
    let input = StringInput::new(source, BytePos(1), BytePos(end));
    let mut parser = Parser::new(Syntax::Es(EsSyntax::default()), input, None);
    let script = parser.parse_script().ok()?;
    let offset = |position: BytePos| (position.0 as usize).checked_sub(1);
    // The script is the parse wrapper: one parenthesised async function.
    let [Stmt::Expr(wrapper)] = script.body.as_slice() else { return None };
    let mut expression = &*wrapper.expr;
    while let Expr::Paren(inner) = expression {
        expression = &inner.expr;
    }
    let Expr::Fn(function) = expression else { return None };
    let body = &function.function.body.as_ref()?.stmts;
    let unwrapped = |mut expression: &Expr| {
        while let Expr::Paren(inner) = expression {
            expression = &inner.expr;
        }
        matches!(expression, Expr::Arrow(_) | Expr::Fn(_))
    };
    // A compiled enum or namespace declares its name last (`var N;`, hoisted): not a statement
    // that ends the program.
    let declares_only = |statement: &Stmt| match statement {
        Stmt::Decl(Decl::Var(declaration)) => {
            declaration.decls.iter().all(|declarator| declarator.init.is_none())
        }
        _ => false,
    };
    let end = body.iter().rposition(|statement| !declares_only(statement)).map_or(0, |at| at + 1);
    match &body[..end] {
        [Stmt::Expr(lone)] if unwrapped(&lone.expr) => {
            let span = lone.expr.span();
            Some(vec![(offset(span.lo)?, "return ("), (offset(span.hi)?, ")()")])
        }
        [Stmt::Decl(Decl::Fn(declared))] => {
            let span = declared.span();
            Some(vec![(offset(span.lo)?, "return ("), (offset(span.hi)?, ")()")])
        }
        [.., Stmt::Expr(last)] if !matches!(&*last.expr, Expr::Assign(_) | Expr::Update(_)) => {
            Some(vec![(offset(last.expr.span().lo)?, "return ")])
        }
        _ => None,
    }
}

/// `source` with its types erased, or `None` when erasure cannot do it (syntax that is not
/// erasable: the transform can).
fn strip(source: &str, header_len: usize) -> Result<Option<String>, StripError> {
    let diagnostics = Arc::new(Mutex::new(Vec::new()));
    let source_map: Lrc<SourceMap> = Lrc::default();
    let emitter =
        Collect { source_map: source_map.clone(), header_len, found: diagnostics.clone() };
    let handler = Handler::with_emitter(true, false, Box::new(emitter));
    let options = Options {
        mode: Mode::StripOnly,
        module: Some(false),
        parser: TsSyntax { decorators: true, ..TsSyntax::default() },
        ..Options::default()
    };
    let outcome = GLOBALS.set(&Globals::new(), || {
        swc_ts_fast_strip::operate(&source_map, &handler, source.to_owned(), options)
    });
    match outcome {
        Ok(output) => Ok(Some(output.code)),
        Err(error) if matches!(error.code, ErrorCode::UnsupportedSyntax) => Ok(None),
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

#[cfg(test)]
mod tests {
    use super::strip_program;

    fn body(program: &str) -> String {
        strip_program(program, &[], false).expect("strips").body
    }

    #[test]
    fn a_program_that_is_one_function_is_called() {
        assert_eq!(body("async () => { return 1 }"), "return (async () => { return 1 })()");
        assert_eq!(body("(async () => 1);"), "return ((async () => 1))();");
        assert_eq!(body("async function main() {}"), "return (async function main() {})()");
        // `export default` after comments is blanked in place: lines and columns stay.
        assert_eq!(
            body("// one\nexport default async () => 2"),
            "// one\n               return (async () => 2)()"
        );
    }

    #[test]
    fn what_erasure_refuses_is_compiled_with_its_positions_and_its_completion() {
        let erased = strip_program("const at: string = 'a@b';\nat", &[], false).expect("strips");
        assert!(erased.positions.is_empty() && erased.body.ends_with("return at"), "{erased:?}");
        for program in
            ["enum E { A }\nE.A", "namespace N { export const a = 1 }\nN.a", "@d class C {}\nC"]
        {
            let compiled = strip_program(program, &[], false).expect("compiles");
            assert!(!compiled.positions.is_empty(), "{program}");
            // The last expression is still the program's value, though the compiled name's
            // declaration comes after it.
            assert!(compiled.body.contains("return "), "{program}: {}", compiled.body);
        }
        let error =
            strip_program("enum E { A }\nconst = 1;", &[], false).expect_err("a syntax error");
        assert!(error.to_string().ends_with("(2:7)"), "{error}");
    }

    #[test]
    fn a_last_expression_is_returned_but_not_an_assignment() {
        assert_eq!(body("const x: number = 1;\nx + 1;"), "const x         = 1;\nreturn x + 1;");
        assert_eq!(body("let y = 0;\ny = 5"), "let y = 0;\ny = 5");
        assert_eq!(body("let y = 0;\ny++"), "let y = 0;\ny++");
        assert_eq!(body("return 1;"), "return 1;");
        assert_eq!(body("if (a) return 1;\nf()"), "if (a) return 1;\nreturn f()");
        // Two functions, or a function and a call: only the last expression counts.
        assert_eq!(body("const f = () => 1;\nf"), "const f = () => 1;\nreturn f");
    }

    #[test]
    fn export_is_only_blanked_at_the_start() {
        let error = strip_program("const a = 1;\nexport default a;", &[], false).unwrap_err();
        assert!(error.to_string().contains("export"), "{error}");
    }
}

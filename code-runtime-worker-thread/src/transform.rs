//! The TypeScript that strip-only erasure refuses (`enum`, `const enum`, `namespace`, parameter
//! properties, angle-bracket assertions) and decorators, compiled with swc's TypeScript and
//! decorator transforms; and the [`Positions`] that take the compiled program's line:column back
//! to the program's own.
//!
//! Only programs that need it come here ([`strip`](crate::strip) tries position-preserving
//! erasure first): a transform re-prints the whole program, so what V8 reports is a position in
//! the printed text, and [`Positions`] maps it back.

use swc_common::comments::SingleThreadedComments;
use swc_common::sync::Lrc;
use swc_common::{
    BytePos, DUMMY_SP, FileName, GLOBALS, Globals, LineCol, Mark, SourceMap, Spanned,
};
use swc_ecma_ast::{
    EsVersion, Expr, Module, ModuleItem, Param, Pat, Program, Script, Stmt, TsParamProp, TsType,
};
use swc_ecma_codegen::text_writer::JsWriter;
use swc_ecma_codegen::{Config, Emitter};
use swc_ecma_parser::{Parser, StringInput, Syntax, TsSyntax, lexer::Lexer};
use swc_ecma_transforms_base::fixer::fixer;
use swc_ecma_transforms_base::helpers::{HELPERS, Helpers, inject_helpers};
use swc_ecma_transforms_base::hygiene::hygiene;
use swc_ecma_transforms_base::resolver;
use swc_ecma_transforms_proposal::decorator_2023_11::decorator_2023_11;
use swc_ecma_transforms_proposal::decorators;
use swc_ecma_transforms_typescript::typescript;
use swc_ecma_visit::{Visit, VisitWith};

/// Where each position of a compiled program came from: `(generated, original)` pairs of
/// zero-based `(line, UTF-16 column)`, sorted by the generated one. The original line 0 begins
/// with the program itself (the parse wrapper's header is left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Positions(Vec<[u32; 4]>);

impl Positions {
    /// The flat form the wire carries: four numbers a position.
    pub(crate) fn flat(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().flatten().copied()
    }

    /// From [`flat`](Self::flat)'s numbers; `None` when they are not whole, sorted positions.
    pub(crate) fn from_flat(numbers: &[u32]) -> Option<Self> {
        if numbers.len() % 4 != 0 {
            return None;
        }
        let entries: Vec<[u32; 4]> =
            numbers.chunks_exact(4).map(|chunk| [chunk[0], chunk[1], chunk[2], chunk[3]]).collect();
        let sorted = entries.windows(2).all(|pair| pair[0][..2] <= pair[1][..2]);
        sorted.then_some(Self(entries))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The program's own one-based `(line, column)` for a one-based position of the compiled
    /// program: that of the nearest mapped position at or before it on its line, moved by the
    /// distance from there.
    fn original(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let (line, column) = (line.checked_sub(1)?, column.checked_sub(1)?);
        let after = self.0.partition_point(|entry| (entry[0], entry[1]) <= (line, column));
        let [generated_line, generated_column, original_line, original_column] =
            *self.0.get(after.checked_sub(1)?)?;
        if generated_line != line {
            return None;
        }
        Some((original_line + 1, original_column + (column - generated_column) + 1))
    }

    /// `text` (an exception's rendering) with every `program:LINE:COLUMN` the compiled program's
    /// put back in the program's own coordinates; one that maps nowhere is left as it is.
    pub(crate) fn restore(&self, text: &str) -> String {
        const MARK: &str = "program:";
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(MARK) {
            let (before, after) = rest.split_at(at + MARK.len());
            out.push_str(before);
            rest = after;
            let Some((line, column, length)) = line_column(rest) else { continue };
            match self.original(line, column) {
                Some((line, column)) => out.push_str(&format!("{line}:{column}")),
                None => out.push_str(&rest[..length]),
            }
            rest = &rest[length..];
        }
        out.push_str(rest);
        out
    }
}

/// `LINE:COLUMN` at the start of `text`, and its length in bytes.
fn line_column(text: &str) -> Option<(u32, u32, usize)> {
    let digits = |text: &str| text.bytes().take_while(u8::is_ascii_digit).count();
    let line_length = digits(text);
    let rest = text[line_length..].strip_prefix(':')?;
    let column_length = digits(rest);
    if line_length == 0 || column_length == 0 {
        return None;
    }
    let line = text[..line_length].parse().ok()?;
    let column = rest[..column_length].parse().ok()?;
    Some((line, column, line_length + 1 + column_length))
}

/// The body of the parse wrapper `source` (`header`, the program, a trailer: one parenthesised
/// async function) compiled to JavaScript, with where its positions came from; decorators as
/// TC39 specifies them, or as `tsc`'s `experimentalDecorators` runs them when
/// `legacy_decorators`. `Err` is swc's first diagnostic, as [`strip`](crate::strip) reports them.
pub(crate) fn compile(
    source: &str,
    header_len: usize,
    legacy_decorators: bool,
) -> Result<(String, Positions), String> {
    GLOBALS.set(&Globals::new(), || {
        let source_map: Lrc<SourceMap> = Lrc::default();
        let file = source_map.new_source_file(FileName::Anon.into(), source.to_owned());
        let comments = SingleThreadedComments::default();
        let syntax = Syntax::Typescript(TsSyntax { decorators: true, ..TsSyntax::default() });
        let lexer =
            Lexer::new(syntax, EsVersion::latest(), StringInput::from(&*file), Some(&comments));
        let mut parser = Parser::new_from(lexer);
        let script = parser.parse_script();
        let errors = parser.take_errors();
        let script = match (script, errors.into_iter().next()) {
            (Ok(script), None) => script,
            (Err(error), _) | (Ok(_), Some(error)) => {
                let at = position_of(
                    source,
                    header_len,
                    error.span().lo.0.saturating_sub(file.start_pos.0),
                );
                return Err(format!("{} ({}:{})", error.kind().msg(), at.0 + 1, at.1 + 1));
            }
        };
        // The wrapper's statements, as a module of their own: the helpers the transforms use go
        // before them, and the decorator transform renames a decorated class's references only
        // in a module's items (in a script's statements they would name the undecorated class).
        if too_deep(&script) {
            return Err(format!(
                "the program nests more than {MAX_NESTING} levels deep; TypeScript that needs \
                 compiling (an enum, a namespace, a parameter property, a decorator) may nest at \
                 most that deep"
            ));
        }
        if let Some(lo) = (!legacy_decorators).then(|| first_parameter_decorator(&script)).flatten()
        {
            let at = position_of(source, header_len, lo.0.saturating_sub(file.start_pos.0));
            return Err(format!(
                "a parameter decorator is TypeScript's experimentalDecorators, which TC39's \
                 decorators (run here) do not have: decorate the class or the method instead \
                 ({}:{})",
                at.0 + 1,
                at.1 + 1
            ));
        }
        let statements = unwrapped(script).ok_or("the program is not inside its wrapper")?;
        let body = statements.into_iter().map(ModuleItem::Stmt).collect();
        let mut program = Program::Module(Module { span: DUMMY_SP, body, shebang: None });
        transformed(&mut program, &comments, legacy_decorators);
        let Program::Module(module) = program else {
            return Err("the TypeScript transform made a script".to_owned());
        };
        // Only statements went in, and the transforms add statements: a module declaration
        // (an import of a helper) would mean the helpers were not inlined.
        let body = module
            .body
            .into_iter()
            .map(|item| item.stmt().ok_or("the TypeScript transform added an import"))
            .collect::<Result<Vec<_>, _>>()?;
        let body = Script { span: DUMMY_SP, body, shebang: None };
        let mut code = Vec::with_capacity(source.len());
        let mut mapped = Vec::new();
        let mut emitter = Emitter {
            cfg: Config::default().with_target(EsVersion::latest()),
            comments: None,
            cm: source_map.clone(),
            wr: JsWriter::new(source_map.clone(), "\n", &mut code, Some(&mut mapped)),
        };
        emitter
            .emit_script(&body)
            .map_err(|error| format!("printing the program failed: {error}"))?;
        let code = String::from_utf8(code).map_err(|_| "the printed program is not UTF-8")?;
        Ok((code, positions(source, header_len, file.start_pos, &mapped)))
    })
}

/// `program` through swc's transforms: decorators (legacy ones first when `legacy_decorators`),
/// TypeScript, the helpers they use printed inline, names made unique, parentheses fixed.
fn transformed(program: &mut Program, comments: &SingleThreadedComments, legacy_decorators: bool) {
    let (unresolved, top_level) = (Mark::new(), Mark::new());
    HELPERS.set(&Helpers::new(false), || {
        program.mutate(&mut resolver(unresolved, top_level, true));
        if legacy_decorators {
            let legacy = decorators::Config {
                legacy: true,
                emit_metadata: false,
                use_define_for_class_fields: true,
            };
            program.mutate(&mut decorators::decorators(legacy));
        }
        // After the legacy transform it has no decorators left, and lowers auto-accessors.
        program.mutate(&mut decorator_2023_11());
        program.mutate(&mut typescript::typescript(Default::default(), unresolved, top_level));
        program.mutate(&mut inject_helpers(unresolved));
        program.mutate(&mut hygiene());
        program.mutate(&mut fixer(Some(comments)));
    });
}

/// Where the first decorator of a parameter is (`constructor(@inject api: Api)`): TC39's
/// decorators have none, and swc's transform would leave it for V8 to refuse without a place.
/// Walked only after [`too_deep`], so the walk's depth is bounded.
fn first_parameter_decorator(script: &Script) -> Option<BytePos> {
    struct First(Option<BytePos>);
    impl Visit for First {
        fn visit_param(&mut self, node: &Param) {
            match node.decorators.first() {
                Some(decorator) => self.0 = self.0.or(Some(decorator.span.lo)),
                None if self.0.is_none() => node.visit_children_with(self),
                None => {}
            }
        }
        fn visit_ts_param_prop(&mut self, node: &TsParamProp) {
            match node.decorators.first() {
                Some(decorator) => self.0 = self.0.or(Some(decorator.span.lo)),
                None if self.0.is_none() => node.visit_children_with(self),
                None => {}
            }
        }
    }
    let mut first = First(None);
    script.visit_with(&mut first);
    first.0
}

/// How deep a compiled program may nest expressions, statements and types: the bound the text
/// was held to before parsing ([`nesting`](crate::nesting)), checked again on the tree. Some of
/// swc's transforms copy a subtree per level (a 300 000-deep array literal took more than 20 GB).
const MAX_NESTING: usize = crate::nesting::MAX_NESTING;

/// Whether `script` nests deeper than [`MAX_NESTING`]. The walk recurses once per level (on
/// the strip's stack, sized for the program's length) and stops one past the bound.
fn too_deep(script: &Script) -> bool {
    #[derive(Default)]
    struct Depth {
        now: usize,
        most: usize,
    }
    impl Depth {
        fn enter(&mut self, visit: impl FnOnce(&mut Self)) {
            self.now += 1;
            self.most = self.most.max(self.now);
            // Past the bound, deeper levels are not walked: the answer is known.
            if self.now <= MAX_NESTING {
                visit(self);
            }
            self.now -= 1;
        }
    }
    impl Visit for Depth {
        fn visit_expr(&mut self, node: &Expr) {
            self.enter(|depth| node.visit_children_with(depth));
        }
        fn visit_stmt(&mut self, node: &Stmt) {
            self.enter(|depth| node.visit_children_with(depth));
        }
        fn visit_pat(&mut self, node: &Pat) {
            self.enter(|depth| node.visit_children_with(depth));
        }
        fn visit_ts_type(&mut self, node: &TsType) {
            self.enter(|depth| node.visit_children_with(depth));
        }
    }
    let mut depth = Depth::default();
    script.visit_with(&mut depth);
    depth.most > MAX_NESTING
}

/// The statements of the wrapper's function (the script's one statement).
fn unwrapped(script: Script) -> Option<Vec<Stmt>> {
    let Ok([Stmt::Expr(wrapper)]) = <[Stmt; 1]>::try_from(script.body) else { return None };
    let mut expression = *wrapper.expr;
    while let Expr::Paren(inner) = expression {
        expression = *inner.expr;
    }
    let Expr::Fn(function) = expression else { return None };
    Some(function.function.body?.stmts)
}

/// The mapped positions, in program coordinates, sorted by the generated position. One pass
/// over the source in the order of the original positions: a position's line and column are
/// counted on from the one before it (a program's every token is mapped, so counting each from
/// its line's start would be quadratic on a long line).
fn positions(
    source: &str,
    header_len: usize,
    start: BytePos,
    mapped: &[(BytePos, LineCol)],
) -> Positions {
    let mut by_offset: Vec<(usize, LineCol)> = mapped
        .iter()
        .filter_map(|(position, generated)| {
            let offset = usize::try_from(position.0.checked_sub(start.0)?).ok()?;
            Some((offset.min(source.len()), *generated))
        })
        .collect();
    by_offset.sort_unstable_by_key(|(offset, _)| *offset);
    // The header is on line 0 before the program: its columns do not count.
    let (mut at, mut line, mut column) = (header_len.min(source.len()), 0u32, 0u32);
    let mut entries = Vec::with_capacity(by_offset.len());
    for (offset, generated) in by_offset {
        if let Some(passed) = source.get(at..offset.max(at)) {
            for c in passed.chars() {
                if c == '\n' {
                    line += 1;
                    column = 0;
                } else {
                    column += u32::try_from(c.len_utf16()).unwrap_or(1);
                }
            }
            at = offset.max(at);
        }
        entries.push([generated.line, generated.col, line, column]);
    }
    entries.sort_unstable();
    entries.dedup_by(|later, earlier| later[..2] == earlier[..2]);
    Positions(entries)
}

/// Zero-based `(line, UTF-16 column)` in the program of byte `offset` of the wrapped `source`
/// (whose first line begins with a `header_len`-byte header the program does not have).
fn position_of(source: &str, header_len: usize, offset: u32) -> (u32, u32) {
    let offset = (offset as usize).min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let line = before.bytes().filter(|&byte| byte == b'\n').count();
    let start = if line == 0 { header_len.min(offset) } else { line_start };
    let column = before.get(start..).map_or(0, |text| text.encode_utf16().count());
    (u32::try_from(line).unwrap_or(u32::MAX), u32::try_from(column).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::Positions;

    #[test]
    fn positions_map_to_the_nearest_one_before_on_the_line() {
        let positions = Positions(vec![[0, 0, 2, 0], [0, 10, 2, 20], [3, 4, 7, 1]]);
        assert_eq!(positions.original(1, 1), Some((3, 1)));
        assert_eq!(positions.original(1, 15), Some((3, 25)));
        assert_eq!(positions.original(4, 9), Some((8, 6)));
        // A line with no mapped position of its own maps nowhere.
        assert_eq!(positions.original(2, 1), None);
        assert_eq!(
            positions.restore("Error: x\n    at f (program:1:15)\n    at program:2:1\nprogram:"),
            "Error: x\n    at f (program:3:25)\n    at program:2:1\nprogram:"
        );
    }

    #[test]
    fn the_flat_form_round_trips_and_refuses_what_is_not_whole() {
        let positions = Positions(vec![[0, 0, 2, 0], [0, 10, 2, 20]]);
        let flat: Vec<u32> = positions.flat().collect();
        assert_eq!(Positions::from_flat(&flat), Some(positions));
        assert_eq!(Positions::from_flat(&flat[..5]), None);
        assert_eq!(Positions::from_flat(&[0, 10, 0, 0, 0, 0, 0, 0]), None);
    }
}

//! `import` and `export` in a program that is a function body: satisfied by the bindings, or a
//! clear error.
//!
//! Some code-mode systems present tools as a file tree (`./servers/google-drive/getDocument.ts`)
//! and models import from it. There are no modules here, but the bindings are the same thing: an
//! `import` at the top of the program (after comments) that names a namespace or a function of
//! one is replaced by a `const` of it, and any other import fails with the program's globals
//! listed. `export` before a declaration is dropped. Every line stays where it was.

use std::fmt::Write as _;

use crate::program::NamespaceSetup;

/// Statements longer than this many lines are not taken for an import.
const MAX_IMPORT_LINES: usize = 64;

/// `program` with its leading imports resolved against `namespaces` and `export` dropped from
/// declarations at the start of a line; the program itself when it has neither.
///
/// # Errors
///
/// An import nothing satisfies: the message names what was imported, from where, and the
/// globals there are.
pub(crate) fn resolved(program: &str, namespaces: &[NamespaceSetup]) -> Result<String, String> {
    let lines: Vec<&str> = program.split_inclusive('\n').collect();
    let mut out = String::with_capacity(program.len());
    let mut index = 0;
    let mut leading = true;
    // Inside a namespace: its brace depth, and whether its body has opened.
    let mut namespace: Option<(usize, bool)> = None;
    while index < lines.len() {
        let line = lines[index];
        let code = line.trim_start();
        if leading && starts_with_word(code, "import") {
            let end = statement_end(&lines, index);
            let statement: String = lines[index..end].concat();
            let replacement = import(&statement, namespaces)?;
            // The declarations on the import's first line; its other lines stay, empty.
            let newline = if line.ends_with('\n') { "\n" } else { "" };
            out.push_str(&replacement);
            out.push_str(newline);
            for rest in &lines[index + 1..end] {
                out.push_str(if rest.ends_with('\n') { "\n" } else { "" });
            }
            index = end;
            continue;
        }
        if !(code.is_empty() || code.starts_with("//")) {
            leading = false;
        }
        // A namespace's `export`s are its members' (the TypeScript transform needs them); the
        // lines from its header to its closing brace keep them.
        if namespace.is_none() && opens_namespace(code) {
            namespace = Some((0, false));
        }
        if namespace.is_none()
            && let Some(end) = export_list_end(&lines, index)
        {
            // An export list declares nothing; in a function body it is dropped whole, its
            // lines kept (empty).
            for dropped in &lines[index..end] {
                out.push_str(if dropped.ends_with('\n') { "\n" } else { "" });
            }
            index = end;
            continue;
        }
        if let Some((depth, opened)) = namespace {
            out.push_str(line);
            let depth = braces(line, depth);
            // Its header may end before its brace does.
            let opened = opened || line.contains('{');
            namespace = (!opened || depth > 0).then_some((depth, opened));
        } else {
            out.push_str(&without_export(line));
        }
        index += 1;
    }
    Ok(out)
}

/// Whether `code` (a trimmed line) begins a namespace or module declaration.
fn opens_namespace(code: &str) -> bool {
    let code = code.strip_prefix("export ").map_or(code, str::trim_start);
    let code = code.strip_prefix("declare ").map_or(code, str::trim_start);
    ["namespace ", "module "].iter().any(|keyword| {
        code.strip_prefix(keyword).is_some_and(|rest| {
            rest.trim_start().starts_with(|c: char| c.is_alphabetic() || c == '_' || c == '$')
        })
    })
}

/// `depth` after the braces of `line`, those in string literals and after `//` left out.
fn braces(line: &str, mut depth: usize) -> usize {
    let mut quote = None;
    let mut escaped = false;
    let mut previous = '\0';
    for c in line.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(open) if c == open => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '/' if previous == '/' => break,
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        previous = c;
    }
    depth
}

/// Whether `code` begins with the keyword `word` (not `imports` or `important`).
fn starts_with_word(code: &str, word: &str) -> bool {
    code.strip_prefix(word)
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_whitespace() || c == '{' || c == '*'))
}

/// The index past the last line of the import statement starting at `start`: the line that
/// holds its module specifier (`from "…"`, or the specifier of `import "…"`).
fn statement_end(lines: &[&str], start: usize) -> usize {
    for (offset, line) in lines[start..].iter().take(MAX_IMPORT_LINES).enumerate() {
        let has_specifier = line.contains(" from ") || line.contains("}from") || {
            let code = line.trim_start();
            offset == 0
                && code
                    .strip_prefix("import")
                    .is_some_and(|rest| rest.trim_start().starts_with(['"', '\'']))
        };
        if has_specifier && (line.contains('"') || line.contains('\'')) {
            return start + offset + 1;
        }
    }
    start + 1
}

/// The index past the last line of the export list starting at `start` (`export { a, b }`,
/// `export type { T }`, `export * from "m"`, each maybe `from` a module), when the statement is
/// all its lines hold; `None` for any other line (or a list sharing its last line with more
/// code, left for the engine to refuse).
fn export_list_end(lines: &[&str], start: usize) -> Option<usize> {
    let rest = lines[start].trim_start().strip_prefix("export")?.trim_start();
    let rest = rest.strip_prefix("type").map_or(rest, str::trim_start);
    if !(rest.starts_with('{') || rest.starts_with('*')) {
        return None;
    }
    let mut depth = 0;
    for (offset, line) in lines[start..].iter().take(MAX_IMPORT_LINES).enumerate() {
        depth = braces(line, depth);
        if depth > 0 {
            continue;
        }
        // What follows the list (or `*`) on its last line: a `from` clause, `;`, a comment.
        let after = match line.rfind('}') {
            Some(brace) => &line[brace + 1..],
            None => line.trim_start().strip_prefix("export")?.trim_start().strip_prefix('*')?,
        };
        let after = after.trim_start();
        let after = after.strip_prefix("as ").map_or(after, |alias| {
            alias
                .trim_start()
                .trim_start_matches(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
        });
        let after = after.trim_start();
        let after = after.strip_prefix("from").map_or(Some(after), |clause| {
            let clause = clause.trim_start();
            let quote = clause.chars().next().filter(|c| *c == '"' || *c == '\'')?;
            let close = clause[1..].find(quote)?;
            Some(&clause[close + 2..])
        })?;
        let after = after.trim_start();
        let after = after.strip_prefix(';').unwrap_or(after).trim();
        return (after.is_empty() || after.starts_with("//")).then_some(start + offset + 1);
    }
    None
}

/// `line` with a leading `export ` before a declaration blanked out (same length).
fn without_export(line: &str) -> std::borrow::Cow<'_, str> {
    let code = line.trim_start();
    let indent = line.len() - code.len();
    let Some(rest) = code.strip_prefix("export ") else { return line.into() };
    let declares = [
        "const ",
        "let ",
        "var ",
        "function ",
        "function*",
        "async ",
        "class ",
        "abstract ",
        "interface ",
        "type ",
        "enum ",
        "declare ",
    ]
    .iter()
    .any(|keyword| rest.trim_start().starts_with(keyword));
    if !declares {
        return line.into();
    }
    format!("{}{}{rest}", &line[..indent], " ".repeat("export ".len())).into()
}

/// The `const` declarations that satisfy one import statement (empty for a type-only import).
fn import(statement: &str, namespaces: &[NamespaceSetup]) -> Result<String, String> {
    let text = statement.split_whitespace().collect::<Vec<_>>().join(" ");
    let body = text.strip_prefix("import").unwrap_or(&text).trim();
    let body = body.strip_suffix(';').unwrap_or(body).trim();
    let (clause, specifier) = match body.rsplit_once(" from ").or_else(|| body.rsplit_once("}from"))
    {
        Some((clause, specifier)) => (clause.trim(), unquoted(specifier)),
        None => ("", unquoted(body)),
    };
    let specifier = specifier.unwrap_or_default();
    let unresolved = |what: &str| unresolved(what, specifier, namespaces);
    if clause.is_empty() {
        return Err(unresolved(&format!("\"{specifier}\"")));
    }
    // Types have no value: `import type { Doc } from …` is erased.
    if let Some(rest) = clause.strip_prefix("type ") {
        if rest.starts_with('{') || rest.chars().next().is_some_and(char::is_alphabetic) {
            return Ok(String::new());
        }
    }
    let mut declarations = String::new();
    let (default_part, named_part) = match clause.find('{') {
        Some(open) => {
            let close = clause.rfind('}').ok_or_else(|| unresolved(clause))?;
            (clause[..open].trim().trim_end_matches(',').trim(), Some(&clause[open + 1..close]))
        }
        None => (clause, None),
    };
    if !default_part.is_empty() {
        let local = default_part.strip_prefix("* as ").unwrap_or(default_part).trim();
        let global =
            namespace_for(local, specifier, namespaces).ok_or_else(|| unresolved(local))?;
        if global != local {
            let _ = write!(declarations, "const {local} = {global}; ");
        }
    }
    for item in named_part.unwrap_or_default().split(',').map(str::trim).filter(|i| !i.is_empty()) {
        // `import { type Doc, getDocument }`: the type is erased.
        if item.starts_with("type ") {
            continue;
        }
        let (name, local) = match item.split_once(" as ") {
            Some((name, local)) => (name.trim(), local.trim()),
            None => (item, item),
        };
        let global = function_for(name, specifier, namespaces).ok_or_else(|| unresolved(name))?;
        let _ = write!(declarations, "const {local} = {global}[{}]; ", quoted(name));
    }
    Ok(declarations.trim_end().to_owned())
}

/// The namespace an `import * as local` or `import local` means: the one named `local`, or the
/// one named like the specifier's last path segment (`./servers/google-drive` is `google_drive`).
fn namespace_for<'n>(
    local: &str,
    specifier: &str,
    namespaces: &'n [NamespaceSetup],
) -> Option<&'n str> {
    let by_local = namespaces.iter().find(|namespace| namespace.global == local);
    let segment = segments(specifier).last().map(identifier_like);
    by_local
        .or_else(|| namespaces.iter().find(|namespace| Some(&namespace.global) == segment.as_ref()))
        .map(|namespace| namespace.global.as_str())
}

/// The namespace that has function `name`: the one named like a segment of the specifier when it
/// has it, else the only one that does.
fn function_for<'n>(
    name: &str,
    specifier: &str,
    namespaces: &'n [NamespaceSetup],
) -> Option<&'n str> {
    let having: Vec<&NamespaceSetup> =
        namespaces.iter().filter(|namespace| namespace.names.iter().any(|n| n == name)).collect();
    let named: Vec<String> = segments(specifier).map(identifier_like).collect();
    having
        .iter()
        .find(|namespace| named.contains(&namespace.global))
        .or_else(|| if having.len() == 1 { having.first() } else { None })
        .map(|namespace| namespace.global.as_str())
}

/// The path segments of a specifier, without `.`/`..` and without a file extension.
fn segments(specifier: &str) -> impl Iterator<Item = &str> {
    specifier
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != "." && *segment != "..")
        .map(|segment| segment.split('.').next().unwrap_or(segment))
}

/// `google-drive` as an identifier: `google_drive`.
fn identifier_like(segment: &str) -> String {
    segment.chars().map(|c| if c.is_alphanumeric() || c == '$' { c } else { '_' }).collect()
}

fn unquoted(text: &str) -> Option<&str> {
    let text = text.trim();
    let quote = text.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    text[1..].strip_suffix(quote)
}

fn quoted(name: &str) -> String {
    code_runtime::json::quote(name)
}

/// The message for an import nothing satisfies.
fn unresolved(what: &str, specifier: &str, namespaces: &[NamespaceSetup]) -> String {
    let globals: Vec<String> = namespaces
        .iter()
        .map(|namespace| format!("{} ({})", namespace.global, namespace.names.join(", ")))
        .collect();
    let globals = if globals.is_empty() { "none".to_owned() } else { globals.join("; ") };
    let globals = code_runtime::json::truncate(&globals, 600).to_owned();
    format!(
        "cannot import {what} from \"{specifier}\": there are no modules here; the program's \
         bindings are globals: {globals}"
    )
}

#[cfg(test)]
mod tests {
    use super::resolved;
    use crate::program::NamespaceSetup;

    fn namespaces() -> Vec<NamespaceSetup> {
        let namespace = |global: &str, names: &[&str]| NamespaceSetup {
            global: global.to_owned(),
            names: names.iter().map(|name| (*name).to_owned()).collect(),
            parameters: vec![None; names.len()],
            error_class: None,
        };
        vec![
            namespace("google_drive", &["getDocument"]),
            namespace("tools", &["search", "getDocument"]),
        ]
    }

    #[test]
    fn imports_of_bindings_become_constants_on_their_own_lines() {
        let program = "// tools\nimport * as tools from './tools';\nimport * as drive from './servers/google-drive';\nimport {\n  getDocument as get,\n  type Doc,\n} from './servers/google-drive/getDocument.ts';\nimport { search } from '../anywhere';\nreturn 1;\n";
        assert_eq!(
            resolved(program, &namespaces()).unwrap(),
            "// tools\n\nconst drive = google_drive;\nconst get = google_drive[\"getDocument\"];\n\n\n\nconst search = tools[\"search\"];\nreturn 1;\n"
        );
    }

    #[test]
    fn export_is_dropped_from_declarations_and_only_leading_imports_count() {
        let program = "export const a = 1;\n  export async function f() {}\nexport { a };\nconst s = 'import x from \"y\"';";
        assert_eq!(
            resolved(program, &namespaces()).unwrap(),
            "       const a = 1;\n         async function f() {}\n\nconst s = 'import x from \"y\"';"
        );
    }

    #[test]
    fn type_level_exports_and_export_lists_are_dropped() {
        let program = "export interface I { a: number }\nexport type T = I;\nexport enum E { A }\nexport abstract class B {}\nexport type { T as U };\nexport {\n  a,\n  b as c,\n} from './m'; // re-exported\nexport * from \"./n\";\nexport * as ns from './o'\nexport { a }; return a\nexport default 1";
        assert_eq!(
            resolved(program, &namespaces()).unwrap(),
            "       interface I { a: number }\n       type T = I;\n       enum E { A }\n       abstract class B {}\n\n\n\n\n\n\n\nexport { a }; return a\nexport default 1"
        );
    }

    #[test]
    fn a_namespaces_exports_stay() {
        let program = "namespace N {\n  export const a = '}';\n  export namespace M { export function f() {} }\n}\nexport const b = N.a;\nexport namespace O { export const c = 1 }\nexport const d = 2;";
        assert_eq!(
            resolved(program, &namespaces()).unwrap(),
            "namespace N {\n  export const a = '}';\n  export namespace M { export function f() {} }\n}\n       const b = N.a;\nexport namespace O { export const c = 1 }\n       const d = 2;"
        );
    }

    #[test]
    fn what_nothing_satisfies_is_an_error_naming_the_bindings() {
        for program in [
            "import { readFile } from 'fs/promises';",
            "import fs from 'fs';",
            "import 'polyfill';",
            // Two namespaces have it and the path names neither.
            "import { getDocument } from './lib';",
        ] {
            let error = resolved(program, &namespaces()).unwrap_err().to_string();
            assert!(error.starts_with("cannot import "), "{program}: {error}");
            assert!(
                error.ends_with("google_drive (getDocument); tools (search, getDocument)"),
                "{error}"
            );
        }
    }
}

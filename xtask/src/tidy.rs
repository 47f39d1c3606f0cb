//! `cargo xtask tidy`: conventions of ARCHITECTURE.md that no compiler checks.
//!
//! - every Rust file starts with a `//!` comment saying what it is for;
//! - every crate opts into the workspace lints;
//! - no module is named `utils` (module names are nouns for the things in them);
//! - no file in a crate's `src` is longer than 800 lines (a file that long holds two things);
//! - no function in a crate's sources (its unit tests aside) is longer than 80 lines (a function
//!   that needs a scroll bar is two functions);
//! - every `unsafe` block and `unsafe impl` has a `// SAFETY:` comment saying why it is sound;
//! - no two modules of a crate depend on each other, however indirectly (module cycles hide which
//!   one is the leaf; plain data goes in a module of its own that both use; see `tidy/modules.rs`);
//! - every document and source file the repository's files name exists in the repository, and
//!   every test docs/conformance.md names is in the file it names (see `tidy/citations.rs`).

mod citations;
mod modules;

use std::fs;
use std::path::{Path, PathBuf};

use crate::toolchain::project_root;

/// The longest function a crate's sources may have, in lines, signature and closing brace
/// included.
const MAX_FUNCTION_LINES: usize = 80;

/// The longest file a crate's `src` may have, in lines.
const MAX_FILE_LINES: usize = 800;

/// The workspace's members, as directories relative to the root, from `cargo metadata` (cargo's
/// own reading of the manifest: globs and exclusions included).
fn workspace_members(root: &Path) -> Result<Vec<String>, String> {
    let metadata = crate::toolchain::cargo_output(&[
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
        "--offline",
    ])?;
    members_of(&metadata, root)
}

/// The member directories in `cargo metadata`'s output: each of `workspace_members` is a package
/// id, `path+file:///abs/dir#version` (or `#name@version`). Read without a JSON library, as xtask
/// has no dependencies.
fn members_of(metadata: &str, root: &Path) -> Result<Vec<String>, String> {
    let start =
        metadata.find("\"workspace_members\":[").ok_or("cargo metadata: no workspace_members")?;
    let list = &metadata[start..];
    let list = &list[..list.find(']').ok_or("cargo metadata: unterminated workspace_members")?];
    list.split('"')
        .filter_map(|id| id.strip_prefix("path+file://"))
        .map(|id| {
            let dir = Path::new(id.split('#').next().unwrap_or(id));
            dir.strip_prefix(root).map(|relative| relative.display().to_string()).map_err(|_| {
                format!("cargo metadata: member {} is outside the root", dir.display())
            })
        })
        .collect()
}

pub(crate) fn run() -> Result<(), String> {
    let root = project_root();
    let mut problems = Vec::new();
    // Every member of the workspace: a new crate is checked the day it is added.
    let members = workspace_members(&root)?;
    if members.len() < 2 {
        return Err(format!(
            "the workspace lists {} member(s); tidy reads it wrong",
            members.len()
        ));
    }
    for krate in &members {
        problems.extend(crate_problems(&root, krate)?);
    }
    problems.extend(citations::problems(&root)?);
    if problems.is_empty() {
        println!("tidy: ok");
        Ok(())
    } else {
        for problem in &problems {
            eprintln!("tidy: {problem}");
        }
        Err(format!("{} tidy problem(s)", problems.len()))
    }
}

/// What one crate of the workspace breaks.
fn crate_problems(root: &Path, krate: &str) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    let dir = root.join(krate);
    let manifest = fs::read_to_string(dir.join("Cargo.toml"))
        .map_err(|e| format!("{krate}/Cargo.toml: {e}"))?;
    if !manifest.contains("[lints]\nworkspace = true") {
        problems.push(format!("{krate}/Cargo.toml: missing `[lints] workspace = true`"));
    }
    let mut files = Vec::new();
    collect_rust_files(&dir, &mut files).map_err(|e| format!("{krate}: {e}"))?;
    let mut modules = modules::ModuleGraph::default();
    for file in files {
        let shown = file.strip_prefix(root).unwrap_or(&file).display().to_string();
        let text = fs::read_to_string(&file).map_err(|e| format!("{shown}: {e}"))?;
        if !text.starts_with("//!") {
            problems.push(format!("{shown}: does not start with a `//!` comment"));
        }
        if file.file_stem().is_some_and(|stem| stem == "utils") {
            problems.push(format!("{shown}: name modules after what they hold, not `utils`"));
        }
        for line in unsafe_without_safety(&text) {
            problems.push(format!("{shown}:{line}: an `unsafe` block without `// SAFETY:`"));
        }
        if !file.starts_with(dir.join("src")) {
            continue;
        }
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            problems.push(format!(
                "{shown}: {lines} lines (at most {MAX_FILE_LINES}; split it by what it owns)"
            ));
        }
        let code = without_tests(&text);
        for (line, name, length) in long_functions(code) {
            problems.push(format!(
                "{shown}:{line}: fn {name} is {length} lines (at most {MAX_FUNCTION_LINES})"
            ));
        }
        if let Some(module) = module_path(&dir.join("src"), &file) {
            modules.add(&module, code);
        }
    }
    for cycle in modules.cycles() {
        problems.push(format!(
            "{krate}: modules {} depend on each other (a cycle; move what they share into a \
             module of its own)",
            cycle.join(", ")
        ));
    }
    Ok(problems)
}

/// The lines (1-based) of `unsafe` blocks and `unsafe impl`s that no `// SAFETY:` comment
/// explains. The comment is on the line itself, or among the comment lines just above the
/// statement the block is in (attributes and the statement's earlier lines may come between).
fn unsafe_without_safety(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        // Code only: not a comment, and not a string literal on the line.
        let code: String =
            line.split("//").next().unwrap_or_default().split('"').step_by(2).collect();
        let is_block = code.contains("unsafe {");
        let is_impl = code.trim_start().starts_with("unsafe impl");
        if !(is_block || is_impl) || line.contains("SAFETY:") {
            continue;
        }
        if !explained_above(&lines[..index]) {
            found.push(index + 1);
        }
    }
    found
}

/// Whether the lines above a statement (`above`, nearest last) hold a `// SAFETY:` comment before
/// the previous statement ends.
fn explained_above(above: &[&str]) -> bool {
    for line in above.iter().rev() {
        let trimmed = line.trim();
        if trimmed.starts_with("//") {
            if trimmed.contains("SAFETY:") {
                return true;
            }
            continue;
        }
        if trimmed.starts_with("#[") || trimmed.starts_with("#![") {
            continue;
        }
        // An earlier line of the same statement goes on; one that ends a statement or opens a
        // block does not.
        if trimmed.is_empty() || trimmed.ends_with([';', '{', '}']) {
            return false;
        }
    }
    false
}

fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if !path.ends_with("target") && !path.ends_with("snapshots") {
                collect_rust_files(&path, files)?;
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// Functions longer than [`MAX_FUNCTION_LINES`]: `(first line, name, length)`. A function starts
/// at a line whose first word after the visibility and qualifiers is `fn`, and ends at the first
/// line after it that closes a brace at the same indentation.
fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let words: Vec<&str> = line.split_whitespace().collect();
        let qualifiers = ["pub", "pub(crate)", "async", "unsafe", "const", "extern", "\"C\""];
        let Some(position) = words.iter().position(|word| !qualifiers.contains(word)) else {
            continue;
        };
        if words[position] != "fn" || line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = words
            .get(position + 1)
            .map(|word| word.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
            .unwrap_or_default();
        let closing = " ".repeat(indent) + "}";
        let end = lines[index..].iter().position(|line| line.trim_end() == closing);
        if let Some(length) = end.map(|offset| offset + 1) {
            if length > MAX_FUNCTION_LINES {
                found.push((index + 1, name, length));
            }
        }
    }
    found
}

/// `text` up to its unit tests (`#[cfg(test)] mod tests`, which this workspace puts last in a
/// file). Other items under `#[cfg(test)]` are code like any other.
fn without_tests(text: &str) -> &str {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let rest = &text[at + line.len()..];
        if line.trim() == "#[cfg(test)]" && rest.trim_start().starts_with("mod tests") {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

/// The module a source file is (the file json/value.rs is `json::value`, mcp.rs and mcp/mod.rs
/// are `mcp`); `None` for a crate root (lib.rs, main.rs, bin/*), which declares the modules
/// rather than using them.
fn module_path(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let mut segments: Vec<String> = relative
        .components()
        .map(|part| part.as_os_str().to_str().map(|name| name.trim_end_matches(".rs").to_owned()))
        .collect::<Option<_>>()?;
    if segments.last().is_some_and(|last| last == "mod") {
        segments.pop();
    }
    let first = segments.first()?;
    (!["lib", "main", "bin"].contains(&first.as_str())).then(|| segments.join("::"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn module_paths_follow_the_files() {
        let src = std::path::Path::new("/c/src");
        let path = |file: &str| super::module_path(src, &src.join(file));
        assert_eq!(path("json/value.rs").as_deref(), Some("json::value"));
        assert_eq!(path("mcp.rs").as_deref(), Some("mcp"));
        assert_eq!(path("mcp/mod.rs").as_deref(), Some("mcp"));
        assert_eq!(path("lib.rs"), None);
        assert_eq!(path("bin/cell.rs"), None);
    }

    /// The workspace as it is: `cargo test` fails on what `cargo xtask tidy` would report.
    #[test]
    fn the_workspace_is_tidy() {
        if let Err(problems) = super::run() {
            panic!("{problems} (each printed above)");
        }
    }

    #[test]
    fn only_the_tests_module_is_cut() {
        let text = "//! A file.\n#[cfg(test)]\nfn boot() {}\nfn after() {}\n#[cfg(test)]\nmod tests {\n}\n";
        assert_eq!(
            super::without_tests(text),
            "//! A file.\n#[cfg(test)]\nfn boot() {}\nfn after() {}\n"
        );
        assert_eq!(super::without_tests("fn a() {}\n"), "fn a() {}\n");
    }

    #[test]
    fn unsafe_blocks_need_their_safety_comment() {
        let text = "//! A file.
fn f() {
    // SAFETY: explained.
    let a = UNSAFE { g() };
    let b = UNSAFE { g() };
    // SAFETY: a statement over lines.
    let c = h(
        1,
        UNSAFE { g() },
    );
    let d = UNSAFE { g() }; // SAFETY: on the line.
    // UNSAFE { in a comment }
}
// SAFETY: explained.
UNSAFE impl Send for X {}
UNSAFE impl Sync for X {}
"
        .replace("UNSAFE", "unsafe");
        assert_eq!(super::unsafe_without_safety(&text), vec![5, 16]);
    }

    #[test]
    fn members_are_read_from_cargo_metadata() {
        let root = std::path::Path::new("/w");
        let metadata = r#"{"packages":[],"workspace_members":["path+file:///w/a#0.0.0","path+file:///w/b/c#c@0.1.0"],"resolve":null}"#;
        assert_eq!(super::members_of(metadata, root).unwrap(), ["a", "b/c"]);
        let outside = r#"{"workspace_members":["path+file:///elsewhere/a#0.0.0"]}"#;
        assert!(super::members_of(outside, root).is_err());
    }

    #[test]
    fn long_functions_are_found() {
        let body = "    x += 1;\n".repeat(85);
        let text = format!(
            "//! A file.\n\npub(crate) fn short() {{\n    1\n}}\n\nasync fn long() {{\n{body}}}\n\nimpl X {{\n    fn inner() {{\n{body}    }}\n}}\n"
        );
        let found = super::long_functions(&text);
        assert_eq!(found, vec![(7, "long".to_owned(), 87), (96, "inner".to_owned(), 87)]);
    }
}

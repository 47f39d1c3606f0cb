//! `cargo xtask tidy`: conventions of ARCHITECTURE.md that no compiler checks.
//!
//! - every Rust file starts with a `//!` comment saying what it is for;
//! - every crate opts into the workspace lints;
//! - no module is named `utils` (module names are nouns for the things in them);
//! - no function in a provider crate's sources is longer than 80 lines (a function that needs a
//!   scroll bar is two functions);
//! - every file docs/conformance.md names exists, and every test it names is in that file.

use std::fs;
use std::path::{Path, PathBuf};

use crate::toolchain::project_root;

const CRATES: [&str; 7] = [
    "code-runtime",
    "code-runtime-worker-thread",
    "code-runtime-python",
    "code-runtime-fixtures",
    "code-runtime-cli",
    "xtask",
    "conformance",
];

/// The crates whose functions must stay short: the providers.
const PROVIDERS: [&str; 2] = ["code-runtime-worker-thread", "code-runtime-python"];

/// The longest function a provider may have, in lines, signature and closing brace included.
const MAX_FUNCTION_LINES: usize = 80;

pub(crate) fn run() -> Result<(), String> {
    let root = project_root();
    let mut problems = Vec::new();
    for krate in CRATES {
        let dir = root.join(krate);
        let manifest = fs::read_to_string(dir.join("Cargo.toml"))
            .map_err(|e| format!("{krate}/Cargo.toml: {e}"))?;
        if !manifest.contains("[lints]\nworkspace = true") {
            problems.push(format!("{krate}/Cargo.toml: missing `[lints] workspace = true`"));
        }
        let mut files = Vec::new();
        collect_rust_files(&dir, &mut files).map_err(|e| format!("{krate}: {e}"))?;
        for file in files {
            let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
            let text = fs::read_to_string(&file).map_err(|e| format!("{shown}: {e}"))?;
            if !text.starts_with("//!") {
                problems.push(format!("{shown}: does not start with a `//!` comment"));
            }
            if file.file_stem().is_some_and(|stem| stem == "utils") {
                problems.push(format!("{shown}: name modules after what they hold, not `utils`"));
            }
            if PROVIDERS.contains(&krate) && file.starts_with(dir.join("src")) {
                for (line, name, length) in long_functions(&text) {
                    problems.push(format!(
                        "{shown}:{line}: fn {name} is {length} lines (at most {MAX_FUNCTION_LINES})"
                    ));
                }
            }
        }
    }
    problems.extend(conformance_map(&root));
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

/// The references of docs/conformance.md that do not hold: a row names a file (`` `path.rs` ``)
/// followed directly (separated by spaces and commas only) by the tests in it
/// (`` `test_name` ``).
fn conformance_map(root: &Path) -> Vec<String> {
    let Ok(map) = fs::read_to_string(root.join("docs/conformance.md")) else {
        return vec!["docs/conformance.md: missing".to_owned()];
    };
    let mut problems = Vec::new();
    for row in map.lines().filter(|line| line.starts_with("| C")) {
        let case = row.split('|').nth(1).unwrap_or_default().trim();
        // Odd pieces are quoted, even ones the text between quotes.
        let pieces: Vec<&str> = row.split('`').collect();
        let mut file: Option<String> = None;
        for (index, item) in pieces.iter().enumerate().skip(1).step_by(2) {
            let joined_to_previous = pieces[index - 1].chars().all(|c| c == ' ' || c == ',');
            if item.contains('/') && item.contains('.') {
                file = fs::read_to_string(root.join(item)).ok();
                if file.is_none() {
                    problems
                        .push(format!("docs/conformance.md: {case} names a missing file {item}"));
                }
            } else if !joined_to_previous {
                file = None;
            } else if let Some(text) = &file {
                if !text.contains(&format!("fn {item}(")) {
                    problems
                        .push(format!("docs/conformance.md: {case} names a missing test {item}"));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
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

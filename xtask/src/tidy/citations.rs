//! Citations that must hold: every document (`*.md`) and every source file (`name.rs`,
//! `name.py`, `name.S`, quoted alone) the repository's files name is one file of the repository, and
//! every test docs/conformance.md names is in the file it names. A design that lives elsewhere,
//! or a comment that still names a file since moved or renamed, fails here.

use std::fs;
use std::path::{Path, PathBuf};

/// The kinds of files read for citations (and `Containerfile`, `.ci/run`).
const CITING: [&str; 10] = ["rs", "md", "py", "ts", "js", "toml", "yaml", "yml", "sh", "S"];

/// Source files named in backquotes must exist; documents must exist wherever they are named.
const SOURCES: [&str; 3] = ["rs", "py", "S"];

/// Directories never read: build output, installed tools, caches, the Helm chart's packaged
/// dependencies.
const SKIPPED: [&str; 6] = ["target", "node_modules", ".venv", ".git", "__pycache__", "charts"];

/// This file: its tests name missing files on purpose.
const THIS_FILE: &str = "xtask/src/tidy/citations.rs";

/// The one place outside the repository the project names: the machine's offline V8 library,
/// which `RUSTY_V8_ARCHIVE` points at (see the README's first lines).
const OUTSIDE: &str = "../shared/v8/";

/// Every broken citation in the repository under `root`, and every broken row of
/// docs/conformance.md.
pub(super) fn problems(root: &Path) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    collect(root, &mut files).map_err(|error| format!("reading the repository: {error}"))?;
    let mut problems = Vec::new();
    for file in files.iter().filter(|file| cites(file)) {
        if file.ends_with(THIS_FILE) {
            continue;
        }
        let Ok(text) = fs::read_to_string(file) else { continue };
        let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
        for (line, cited) in citations(&text) {
            if !resolves(root, &files, file, &cited) {
                problems.push(format!(
                    "{shown}:{line}: names `{cited}`, which is no one file of the repository"
                ));
            }
        }
    }
    problems.extend(conformance_map(root));
    Ok(problems)
}

/// Every file of the repository (but the [`SKIPPED`] directories).
fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        if path.is_dir() {
            if !SKIPPED.contains(&name) {
                collect(&path, files)?;
            }
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// Whether `file` is of a kind read for citations.
fn cites(file: &Path) -> bool {
    file.extension().and_then(|ext| ext.to_str()).is_some_and(|ext| CITING.contains(&ext))
        || file.ends_with("Containerfile")
        || file.ends_with(".ci/run")
}

/// The files `text` names: `(line, name)`. A document is any word ending in `.md`; a source file
/// is one of [`SOURCES`] quoted alone (`` `zygote.rs` ``, not a command line such as
/// `` `code-runtime run one.py` ``). Addresses (`https://…`) and absolute paths (a program's
/// data) are no citation of ours.
fn citations(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line: String = line
            .split_whitespace()
            .filter(|word| !word.contains("://"))
            .collect::<Vec<_>>()
            .join(" ");
        for (piece_index, piece) in line.split('`').enumerate() {
            let alone = piece_index % 2 == 1 && !piece.contains(' ');
            for word in piece.split(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c))) {
                let word = word.trim_end_matches('.');
                let Some((stem, extension)) = word.rsplit_once('.') else { continue };
                let named = extension == "md" || (alone && SOURCES.contains(&extension));
                let data = word.starts_with('/') || stem.is_empty() || stem.ends_with('/');
                if named && !data {
                    found.push((index + 1, word.to_owned()));
                }
            }
        }
    }
    found
}

/// Whether `cited`, named in `file`, is a file of the repository: a path relative to the naming
/// file's directory or to the root, or else the end of the path of exactly one file in the
/// naming file's crate (a name two files of a crate share says nothing: the citation must say
/// which). A file in no crate (ARCHITECTURE.md, docs/) speaks of every crate: there, the end of
/// any file's path will do.
fn resolves(root: &Path, files: &[PathBuf], file: &Path, cited: &str) -> bool {
    if cited.starts_with(OUTSIDE) {
        return true;
    }
    let here = file.parent().unwrap_or(root);
    if here.join(cited).is_file() || root.join(cited).is_file() {
        return true;
    }
    let krate = crate_dir(root, file);
    let scope = krate.as_deref().unwrap_or(root);
    let suffix = format!("/{}", cited.trim_start_matches("./"));
    let matching = files
        .iter()
        .filter(|candidate| candidate.starts_with(scope))
        .filter(|candidate| candidate.to_string_lossy().ends_with(&suffix))
        .count();
    if krate.is_some() { matching == 1 } else { matching >= 1 }
}

/// The crate (a directory with a `Cargo.toml` below the root) that `file` is in, if any.
fn crate_dir(root: &Path, file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .take_while(|dir| *dir != root)
        .find(|dir| dir.join("Cargo.toml").is_file())
        .map(Path::to_owned)
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
    fn documents_and_quoted_sources_are_citations_and_addresses_are_not() {
        let text = "//! See DESIGN.md §9 and docs/security.md.\n// `zygote.rs`, zygote.rs, `run_init.S`, `run one.py`\n// https://example.com/README.md `/notes/a.md`\n";
        let cited: Vec<(usize, String)> = super::citations(text);
        let names: Vec<&str> = cited.iter().map(|(_, name)| name.as_str()).collect();
        assert_eq!(names, ["DESIGN.md", "docs/security.md", "zygote.rs", "run_init.S"]);
        assert_eq!(cited[2].0, 2);
    }

    #[test]
    fn the_repository_resolves_its_own_names_and_not_others() {
        let root = crate::toolchain::project_root();
        let mut files = Vec::new();
        super::collect(&root, &mut files).unwrap();
        let file = root.join("code-runtime-sandbox/src/message.rs");
        let held = ["cell_server.rs", "docs/security.md", "src/cell.rs", "../../ARCHITECTURE.md"];
        for held in held {
            assert!(super::resolves(&root, &files, &file, held), "{held}");
        }
        // Not in the repository, or in another crate only.
        for missing in ["DESIGN.md", "zygote.py", "docs/nowhere.md", "src/nowhere.rs"] {
            assert!(!super::resolves(&root, &files, &file, missing), "{missing}");
        }
        // Two files of one crate share a name; from outside any crate, any file will do.
        let worker = root.join("code-runtime-worker-thread/src/bin/code-runtime-v8-cell.rs");
        assert!(!super::resolves(&root, &files, &worker, "web.rs"));
        assert!(super::resolves(&root, &files, &root.join("docs/security.md"), "substrate.rs"));
    }
}

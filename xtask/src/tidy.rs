//! `cargo xtask tidy`: conventions of ARCHITECTURE.md that no compiler checks.
//!
//! - every Rust file starts with a `//!` comment saying what it is for;
//! - every crate opts into the workspace lints;
//! - no module is named `utils` (module names are nouns for the things in them).

use std::fs;
use std::path::{Path, PathBuf};

use crate::toolchain::project_root;

const CRATES: [&str; 6] = [
    "code-runtime",
    "code-runtime-worker-thread",
    "code-runtime-python",
    "code-runtime-cli",
    "xtask",
    "conformance",
];

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
        }
    }
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

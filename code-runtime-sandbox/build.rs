//! Writes `CODE_RUNTIME_CELL_SERVER_BUILD`: a hash of the sources that run on either side of a
//! cell server (`src/cell_server.rs`), so that a host and a spawner process of different builds
//! refuse each other even though every crate's version is 0.0.0.
//!
//! The sources are this crate's, and those of the crates whose programs a spawner process or a
//! zygote serves (the V8 cell, the TypeScript and Python providers), with the lockfile (the
//! versions of every dependency, V8 among them, in a `--locked` build). A path that is not there
//! (a build from a copy of this crate alone) counts as empty.

#![allow(clippy::print_stdout, reason = "a build script speaks to cargo on its standard output")]

use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};

/// What the build id covers, relative to the workspace's root.
const SOURCES: [&str; 9] = [
    "Cargo.lock",
    "code-runtime-sandbox/Cargo.toml",
    "code-runtime-sandbox/src",
    "code-runtime-cell/src",
    "code-runtime-worker-thread/Cargo.toml",
    "code-runtime-worker-thread/src",
    "code-runtime-python/Cargo.toml",
    "code-runtime-python/src",
    "code-runtime-python/python",
];

fn main() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("..");
    let mut files = Vec::new();
    for source in SOURCES {
        let path = root.join(source);
        // Only what exists: cargo takes a missing path as changed, and would run this again (and
        // build everything above this crate again) on every build of a copy of it alone.
        if path.exists() {
            println!("cargo::rerun-if-changed={}", path.display());
            collect(&path, &mut files);
        }
    }
    files.sort();
    // 128 bits, so that two builds never meet by chance: two SipHash states, the second started
    // from a prefix. (SipHash's keys are std's fixed ones; another toolchain may hash otherwise,
    // which only makes its build another build, as it is.)
    let mut hashers = [DefaultHasher::new(), DefaultHasher::new()];
    hashers[1].write(b"code-runtime cell server");
    for file in &files {
        let name = file.strip_prefix(&root).unwrap_or(file).to_string_lossy().into_owned();
        let bytes = std::fs::read(file).unwrap_or_default();
        for hasher in &mut hashers {
            hasher.write(name.as_bytes());
            hasher.write_usize(bytes.len());
            hasher.write(&bytes);
        }
    }
    let [first, second] = hashers.map(|hasher| hasher.finish());
    println!("cargo::rustc-env=CODE_RUNTIME_CELL_SERVER_BUILD={first:016x}{second:016x}");
}

/// Every file under `path` (or `path` itself), skipping caches an interpreter writes.
fn collect(path: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(path) else {
        if path.is_file() {
            files.push(path.to_owned());
        }
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|name| name == "__pycache__") {
            continue;
        }
        collect(&path, files);
    }
}

//! Files a host remembers things in between processes (what the machine gives, what an
//! interpreter is): what they hold decides how programs are contained, so only a file that this
//! user wrote and nobody else may change is read.

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The user's cache directory for code-runtime: `$XDG_CACHE_HOME/code-runtime`, else
/// `$HOME/.cache/code-runtime`; `None` when neither is set.
pub fn user_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .map(|dir| dir.join("code-runtime"))
}

/// The contents of `path` if it is a regular file of this process's user that neither its group
/// nor others may write; `None` otherwise (a symbolic link included).
pub fn read_private(path: &Path) -> Option<Vec<u8>> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !metadata.is_file() || metadata.uid() != uid || metadata.mode() & 0o022 != 0 {
        return None;
    }
    std::fs::read(path).ok()
}

/// Writes `parts` one after the other to `path`, a file only this user may read and write, in a
/// directory created `0700` if missing. Written aside and renamed into place, so a reader never
/// sees half of it.
///
/// # Errors
///
/// What creating, writing or renaming reports.
pub fn write_private(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let dir = path.parent().ok_or(io::ErrorKind::InvalidInput)?;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)?;
    for part in parts {
        file.write_all(part)?;
    }
    drop(file);
    std::fs::rename(&partial, path)
}

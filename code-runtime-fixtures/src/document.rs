//! Reading files a person wrote: with a size bound, from regular files only, and parsed strictly.

use std::io::Read;
use std::path::Path;

use code_runtime::JsonValue;
use code_runtime::json;

use crate::FixtureError;

/// The largest file read: far beyond any bindings file, limits file or program, far below what
/// would hurt the host.
pub const MAX_DOCUMENT_BYTES: u64 = 16 << 20;

/// The text of the file at `path`, which must be a regular file of at most
/// [`MAX_DOCUMENT_BYTES`] in UTF-8.
///
/// # Errors
///
/// A [`FixtureError`] naming the file: missing, not a regular file (a FIFO, a device such as
/// `/dev/zero`, a directory), too large, or not UTF-8.
pub fn read_text(path: &Path) -> Result<String, FixtureError> {
    read_text_within(path, MAX_DOCUMENT_BYTES)
}

/// [`read_text`] with a bound of `max_bytes` (a checkpoint holds a run's logs and answers, so
/// it may be larger than a document a person writes).
///
/// # Errors
///
/// As [`read_text`].
pub fn read_text_within(path: &Path, max_bytes: u64) -> Result<String, FixtureError> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    // Non-blocking, so that opening a FIFO does not wait for a writer; regular files ignore it.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| FixtureError::new(format!("cannot read {shown}: {error}")))?;
    let metadata = file
        .metadata()
        .map_err(|error| FixtureError::new(format!("cannot read {shown}: {error}")))?;
    if !metadata.is_file() {
        return Err(FixtureError::new(format!("{shown} is not a regular file")));
    }
    read_bounded(file, &shown.to_string(), max_bytes)
}

/// Reads at most `max_bytes` of UTF-8 from `reader` (a file, or stdin), named `name` in errors.
///
/// # Errors
///
/// As [`read_text`].
pub(crate) fn read_bounded(
    reader: impl Read,
    name: &str,
    max_bytes: u64,
) -> Result<String, FixtureError> {
    let mut bytes = Vec::new();
    reader
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| FixtureError::new(format!("cannot read {name}: {error}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(FixtureError::new(format!("{name} is larger than {} MiB", max_bytes >> 20)));
    }
    String::from_utf8(bytes).map_err(|_| FixtureError::new(format!("{name} is not UTF-8")))
}

/// The JSON document in the file at `path`: read as [`read_text`] does and parsed without
/// recursion, refusing a key given twice in one object.
///
/// # Errors
///
/// As [`read_text`], or the parse error with its byte offset.
pub fn read_document(path: &Path) -> Result<JsonValue, FixtureError> {
    let text = read_text(path)?;
    json::parse_strict(&text)
        .map_err(|error| FixtureError::new(format!("{}: {error}", path.display())))
}

/// Reads the program text of the command line: a file, or stdin for `-`.
///
/// # Errors
///
/// As [`read_text`].
pub fn read_program(path: &str) -> Result<String, FixtureError> {
    if path == "-" {
        return read_bounded(std::io::stdin().lock(), "stdin", MAX_DOCUMENT_BYTES);
    }
    read_text(Path::new(path))
}

//! Paused runs' checkpoints too large to travel ([`KEPT_OVER_BYTES`]): kept by the gateway, in a
//! store replicas may share ([`KeptCheckpoints`]), and handed to the client as a small handle,
//! `{"kept": "<signature>"}`, which `resume_run` takes in the checkpoint's place.
//!
//! A checkpoint carries every call's argument and answer, so it grows with what the program
//! exchanged, not with what it printed: 50 answers of 2 MB made a paused result of 100 MB, sent
//! twice (as text and as structured content), past what either transport carries back (a line
//! of 16 MiB over stdio, a body of 4 MiB over HTTP). Kept, the result is what the output budget
//! already bounds: the logs, the pending calls and the handle. The handle is the checkpoint's
//! MAC: only a checkpoint this gateway (or a replica with its key) signed and kept is found by
//! it, and the core checks the MAC again when it resumes.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use code_runtime::json::JsonValue;
use code_runtime::{CodeRunResult, json};

/// A paused result whose checkpoint would make it longer than this is sent with a handle
/// instead: a quarter of a mebibyte, far below what any transport carries, and more than a run
/// of a few dozen small calls needs.
pub const KEPT_OVER_BYTES: usize = 256 << 10;

/// How long a kept checkpoint can be resumed: a day, for a user to decide.
pub const KEPT_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// The most a [`KeptFiles`] store holds, in bytes and in checkpoints; the oldest go first.
pub const KEPT_FILES_BYTES: u64 = 4 << 30;
/// See [`KEPT_FILES_BYTES`].
pub const KEPT_FILES_COUNT: usize = 1000;

/// Where checkpoints too large to travel are kept, by signature, until one `resume_run` takes
/// each: a handle is good once, so a request of a few bytes never makes the store read a large
/// checkpoint twice. Replicas that resume each other's checkpoints share one ([`KeptFiles`] on
/// a shared volume).
pub trait KeptCheckpoints: Send + Sync {
    /// Keeps `text`, the checkpoint signed `signature`.
    ///
    /// # Errors
    ///
    /// It cannot be kept (no room, no disk): the run's result says so.
    fn keep(&self, signature: &str, text: &str) -> Result<(), String>;

    /// The checkpoint signed `signature`, taken out of the store, if it is kept (and not
    /// expired); of two takes at once, one gets it.
    ///
    /// # Errors
    ///
    /// The store cannot be read.
    fn take(&self, signature: &str) -> Result<Option<String>, String>;
}

/// Kept checkpoints in this process's memory, at most `max_bytes` of them (the oldest go first):
/// a gateway's default when it is given no store.
pub struct KeptInMemory {
    kept: Mutex<VecDeque<(String, String, SystemTime)>>,
    max_bytes: usize,
}

impl KeptInMemory {
    /// A store of at most `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self { kept: Mutex::default(), max_bytes }
    }
}

impl KeptCheckpoints for KeptInMemory {
    fn keep(&self, signature: &str, text: &str) -> Result<(), String> {
        if text.len() > self.max_bytes {
            return Err(format!("it is larger than the {} bytes kept in memory", self.max_bytes));
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut held: usize = kept.iter().map(|(_, text, _)| text.len()).sum();
        while held + text.len() > self.max_bytes {
            let Some((_, oldest, _)) = kept.pop_front() else { break };
            held -= oldest.len();
        }
        kept.push_back((signature.to_owned(), text.to_owned(), SystemTime::now()));
        Ok(())
    }

    fn take(&self, signature: &str) -> Result<Option<String>, String> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(at) = kept.iter().position(|(kept, _, _)| kept == signature) else {
            return Ok(None);
        };
        Ok(kept.remove(at).filter(|(_, _, at)| fresh(*at)).map(|(_, text, _)| text))
    }
}

/// Kept checkpoints as files `<signature>.json` in a directory of this user's alone (made so,
/// and refused when another user could write it), each written whole under a fresh name and
/// renamed into place, and taken by renaming it away first. At most [`KEPT_FILES_BYTES`] and
/// [`KEPT_FILES_COUNT`]; older than [`KEPT_FOR`], gone (whenever another is kept).
pub struct KeptFiles {
    dir: PathBuf,
}

impl KeptFiles {
    /// A store in `dir`, made when the first checkpoint is kept.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory, made for this user alone if it is not there; refused if another user
    /// could write it.
    fn dir(&self) -> Result<&PathBuf, String> {
        use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
        let failed = |error: std::io::Error| format!("{}: {error}", self.dir.display());
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir).map_err(failed)?;
        let metadata = std::fs::symlink_metadata(&self.dir).map_err(failed)?;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        if !metadata.is_dir() || metadata.uid() != uid || metadata.mode() & 0o022 != 0 {
            return Err(format!(
                "{}: not a directory of this user's that only this user can write",
                self.dir.display()
            ));
        }
        Ok(&self.dir)
    }

    /// Removes the expired checkpoints, then the oldest until `adding` more bytes fit.
    fn make_room(&self, dir: &PathBuf, adding: u64) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut kept: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for entry in entries.flatten() {
            let Ok(metadata) = entry.metadata() else { continue };
            let at = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if fresh(at) {
                kept.push((at, metadata.len(), entry.path()));
            } else {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        kept.sort();
        let mut held: u64 = kept.iter().map(|(_, len, _)| len).sum();
        let mut count = kept.len();
        for (_, len, path) in kept {
            if held + adding <= KEPT_FILES_BYTES && count < KEPT_FILES_COUNT {
                break;
            }
            let _ = std::fs::remove_file(path);
            held -= len;
            count -= 1;
        }
    }
}

impl KeptCheckpoints for KeptFiles {
    fn keep(&self, signature: &str, text: &str) -> Result<(), String> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let name = file_name(signature)?;
        if text.len() as u64 > KEPT_FILES_BYTES {
            return Err(format!("it is larger than the {KEPT_FILES_BYTES} bytes the store holds"));
        }
        let dir = self.dir()?;
        let failed = |error: std::io::Error| format!("{}: {error}", dir.display());
        self.make_room(dir, text.len() as u64);
        // A fresh name, made only if nothing (not even a link) is there: replicas share the
        // directory, and may share a process id in their own namespaces.
        let partial = dir.join(format!(".{name}.{:016x}", unique()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&partial)
            .map_err(failed)?;
        let written = file.write_all(text.as_bytes()).and_then(|()| file.sync_all());
        if let Err(error) = written.and_then(|()| std::fs::rename(&partial, dir.join(&name))) {
            let _ = std::fs::remove_file(&partial);
            return Err(failed(error));
        }
        Ok(())
    }

    fn take(&self, signature: &str) -> Result<Option<String>, String> {
        let name = file_name(signature)?;
        let dir = self.dir()?;
        // Renamed away first: of two takes at once, one finds it.
        let taken = dir.join(format!(".{name}.taken.{:016x}", unique()));
        match std::fs::rename(dir.join(&name), &taken) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("{}: {error}", dir.display())),
        }
        let fresh_enough = std::fs::symlink_metadata(&taken)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|metadata| metadata.modified().ok())
            .is_some_and(fresh);
        let text = fresh_enough.then(|| {
            let max = code_runtime::MAX_CHECKPOINT_BYTES as u64;
            code_runtime_fixtures::read_text_within(&taken, max).map_err(|error| error.to_string())
        });
        let _ = std::fs::remove_file(&taken);
        text.transpose()
    }
}

/// A number no other name of this store's is likely to have (the file is made only if its name
/// is free, so a clash fails rather than overwrites).
fn unique() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos(),
    );
    hasher.finish()
}

/// A signature (64 hexadecimal digits) as a file name, never a path.
fn file_name(signature: &str) -> Result<String, String> {
    if signature.len() != 64 || !signature.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(format!("{} is not a checkpoint's signature", json::quote(signature)));
    }
    Ok(format!("{}.json", signature.to_ascii_lowercase()))
}

/// Whether a checkpoint kept at `at` can still be resumed.
fn fresh(at: SystemTime) -> bool {
    at.elapsed().map_or(true, |age| age < KEPT_FOR)
}

/// The paused result as the client gets it: inline when it is short, else with its checkpoint
/// kept in `kept` and a handle in its place; `Err` says why a checkpoint could not be kept.
pub(crate) fn paused_text(
    result: &CodeRunResult,
    kept: &dyn KeptCheckpoints,
) -> Result<String, String> {
    let Some(paused) = result.paused() else { return Ok(result.to_json()) };
    let checkpoint = paused.checkpoint.to_json();
    if checkpoint.len() <= KEPT_OVER_BYTES {
        return Ok(result.to_json());
    }
    let signature = paused.checkpoint.signature();
    kept.keep(&signature, &checkpoint)?;
    let pending: Vec<JsonValue> = paused
        .pending
        .iter()
        .map(|call| {
            json!({ "id": call.id, "namespace": call.namespace.as_str(),
                    "function": call.function.as_str(), "args": call.args.clone() })
        })
        .collect();
    let logs: Vec<JsonValue> =
        result.logs().iter().map(|log| JsonValue::from(log.as_str())).collect();
    let value = json!({ "logs": logs, "paused": { "pending": pending, "checkpoint": { "kept": signature } } });
    Ok(json::encode(&value))
}

/// The signature of a kept checkpoint's handle, `{"kept": "<signature>"}`.
pub(crate) fn handle(checkpoint: &serde_json::Value) -> Option<&str> {
    let object = checkpoint.as_object()?;
    (object.len() == 1).then(|| object.get("kept")?.as_str()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_keep_by_signature_only_and_a_handle_is_taken_once() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("code-runtime-kept-{}", std::process::id()));
        let files = KeptFiles::new(&dir);
        let signature = "ab".repeat(32);
        files.keep(&signature, "{\"format\":1}").unwrap();
        let mode = std::fs::metadata(dir.join(format!("{signature}.json"))).unwrap().permissions();
        assert_eq!(mode.mode() & 0o777, 0o600);
        assert_eq!(files.take(&signature).unwrap().as_deref(), Some("{\"format\":1}"));
        assert_eq!(files.take(&signature).unwrap(), None, "taken once");
        assert_eq!(files.take(&"cd".repeat(32)).unwrap(), None);
        for bad in ["../etc/passwd", "ab", &"zz".repeat(32)] {
            assert!(files.keep(bad, "x").is_err(), "{bad}");
            assert!(files.take(bad).is_err(), "{bad}");
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing left behind");
        // A directory others can write is refused.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = files.keep(&signature, "x").unwrap_err();
        assert!(refused.contains("only this user can write"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn memory_keeps_the_newest_within_its_bound_and_a_handle_is_taken_once() {
        let memory = KeptInMemory::new(10);
        memory.keep("a", "12345").unwrap();
        memory.keep("b", "123456").unwrap();
        assert_eq!(memory.take("a").unwrap(), None, "the oldest went");
        assert_eq!(memory.take("b").unwrap().as_deref(), Some("123456"));
        assert_eq!(memory.take("b").unwrap(), None, "taken once");
        assert!(memory.keep("c", "12345678901").is_err());
    }

    #[test]
    fn a_handle_is_an_object_of_one_key() {
        let signature = "ab".repeat(32);
        assert_eq!(handle(&serde_json::json!({ "kept": signature })), Some(signature.as_str()));
        assert_eq!(handle(&serde_json::json!({ "kept": signature, "x": 1 })), None);
        assert_eq!(handle(&serde_json::json!({ "format": 1 })), None);
    }
}

//! [`DirectorySessionStore`]: sessions as files in a directory a host's replicas share.
//!
//! One file per session, named by [`SessionId::key`]: a first line naming the format, a JSON
//! header (owner, name, language, sequence number, run count, when saved, how long it may idle,
//! the definitions, each value's name, type and length), the values' bytes one after the other,
//! and an HMAC-SHA256 of all of that under the host's key. A file is read whole, its MAC checked
//! before anything in it is believed, and replaced by renaming a finished file over it, under a
//! lock on its own lock file, after checking that the sequence number it holds is the one the
//! save follows.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::state::{Definition, SessionId, SessionState, SessionValue, now_ms};
use super::store::{Loaded, SessionError, SessionStore, SessionSummary, TurnHold};
use crate::checkpoint::CheckpointKey;

/// The first line of every session file.
const MAGIC: &[u8] = b"code-runtime session 1\n";
/// What the MAC covers besides the file, so no other MAC of the key verifies here.
const DOMAIN: &[u8] = b"code-runtime session file 1\n";
/// The length of the MAC at the end of a file.
const MAC_BYTES: usize = 32;
/// The largest file read: a session is at most a gibibyte, its header a few times its names.
const MAX_FILE_BYTES: u64 = 4 << 30;

/// Sessions as signed files in one directory (0700, each file 0600), which replicas of a host
/// share: a run on one replica continues a session another started. Files not signed with the
/// key, or changed since, are refused ([`SessionError::Refused`]); two replicas never both save
/// one session ([`SessionError::Conflict`]).
#[derive(Clone)]
pub struct DirectorySessionStore {
    dir: Arc<PathBuf>,
    key: CheckpointKey,
}

impl std::fmt::Debug for DirectorySessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectorySessionStore").field("dir", &self.dir).finish_non_exhaustive()
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Header {
    owner: String,
    name: String,
    language: String,
    seq: u64,
    run: u64,
    saved_ms: u64,
    idle_ms: u64,
    definitions: Vec<HeaderDefinition>,
    values: Vec<HeaderValue>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderDefinition {
    names: Vec<String>,
    kind: String,
    source: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderValue {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    bytes: u64,
}

impl DirectorySessionStore {
    /// The store in `dir` (made, 0700, if missing), its files signed with `key`: replicas that
    /// share the directory share the key.
    ///
    /// # Errors
    ///
    /// The directory cannot be made or is not a directory.
    pub fn open(dir: impl Into<PathBuf>, key: CheckpointKey) -> Result<Self, SessionError> {
        let dir = dir.into();
        fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|error| {
            SessionError::Store(format!("cannot make {}: {error}", dir.display()))
        })?;
        if !dir.is_dir() {
            return Err(SessionError::Store(format!("{} is not a directory", dir.display())));
        }
        Ok(Self { dir: Arc::new(dir), key })
    }

    /// The store in `dir`, signed with the key in its file `key` (made, 0600, with a fresh key
    /// the first time): for one user's own sessions, as the command line keeps them.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open), or the key file cannot be read, made, or holds no key.
    pub fn open_with_own_key(dir: impl Into<PathBuf>) -> Result<Self, SessionError> {
        let store = Self::open(dir, CheckpointKey::new([0u8; 16]).map_err(store_error)?)?;
        let path = store.dir.join("key");
        let key = match fs::read_to_string(&path) {
            Ok(text) => CheckpointKey::from_hex(&text)
                .map_err(|error| SessionError::Store(format!("{}: {error}", path.display())))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let key = CheckpointKey::generate().map_err(store_error)?;
                let made = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
                match made {
                    Ok(mut file) => {
                        file.write_all(key.to_hex().as_bytes())
                            .and_then(|()| file.sync_all())
                            .map_err(store_error)?;
                        key
                    }
                    // Two first runs at once: the one whose file won is the key.
                    Err(_) => {
                        CheckpointKey::from_hex(&fs::read_to_string(&path).map_err(store_error)?)
                            .map_err(store_error)?
                    }
                }
            }
            Err(error) => return Err(SessionError::Store(format!("{}: {error}", path.display()))),
        };
        Ok(Self { key, ..store })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str, extension: &str) -> PathBuf {
        self.dir.join(format!("{key}.{extension}"))
    }

    fn mac(&self, body: &[u8]) -> Vec<u8> {
        self.key.mac_of(DOMAIN, body)
    }

    /// The state in `path`, checked; `None` when there is no file.
    fn read(&self, path: &Path) -> Result<Option<(SessionId, SessionState)>, SessionError> {
        let refused = |why: &str| SessionError::Refused {
            name: path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            why: why.to_owned(),
        };
        let mut file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(SessionError::Store(format!("{}: {error}", path.display()))),
        };
        let mut bytes = Vec::new();
        Read::by_ref(&mut file)
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(store_error)?;
        if bytes.len() as u64 > MAX_FILE_BYTES || bytes.len() < MAGIC.len() + MAC_BYTES {
            return Err(refused("it is not a session file"));
        }
        let (body, mac) = bytes.split_at(bytes.len() - MAC_BYTES);
        if !constant_time_eq(&self.mac(body), mac) {
            return Err(refused("its signature does not verify (forged, or changed since)"));
        }
        let body = body.strip_prefix(MAGIC).ok_or_else(|| refused("it is not a session file"))?;
        let end =
            body.iter().position(|&byte| byte == b'\n').ok_or_else(|| refused("no header"))?;
        let header: Header =
            serde_json::from_slice(&body[..end]).map_err(|_| refused("its header is malformed"))?;
        let mut rest = &body[end + 1..];
        let mut values = Vec::with_capacity(header.values.len());
        for value in header.values {
            let len = usize::try_from(value.bytes).unwrap_or(usize::MAX);
            if len > rest.len() {
                return Err(refused("it is shorter than its header says"));
            }
            let (bytes, after) = rest.split_at(len);
            rest = after;
            values.push(SessionValue {
                name: value.name,
                type_name: value.type_name,
                bytes: bytes.to_vec(),
            });
        }
        let id = SessionId::new(header.name).owned_by(header.owner);
        let definitions = header
            .definitions
            .into_iter()
            .map(|d| Definition { names: d.names, kind: d.kind, source: d.source })
            .collect();
        let state = SessionState {
            language: header.language,
            seq: header.seq,
            run: header.run,
            saved_ms: header.saved_ms,
            idle_ms: header.idle_ms,
            definitions,
            values,
        };
        Ok(Some((id, state)))
    }

    fn encode(&self, id: &SessionId, state: &SessionState) -> Result<Vec<u8>, SessionError> {
        let header = Header {
            owner: id.owner().to_owned(),
            name: id.name().to_owned(),
            language: state.language.clone(),
            seq: state.seq,
            run: state.run,
            saved_ms: state.saved_ms,
            idle_ms: state.idle_ms,
            definitions: state
                .definitions
                .iter()
                .map(|d| HeaderDefinition {
                    names: d.names.clone(),
                    kind: d.kind.clone(),
                    source: d.source.clone(),
                })
                .collect(),
            values: state
                .values
                .iter()
                .map(|v| HeaderValue {
                    name: v.name.clone(),
                    type_name: v.type_name.clone(),
                    bytes: v.bytes.len() as u64,
                })
                .collect(),
        };
        let mut out = MAGIC.to_vec();
        serde_json::to_writer(&mut out, &header).map_err(store_error)?;
        out.push(b'\n');
        for value in &state.values {
            out.extend_from_slice(&value.bytes);
        }
        let mac = self.mac(&out);
        out.extend_from_slice(&mac);
        Ok(out)
    }

    fn load_now(&self, id: &SessionId) -> Result<Loaded, SessionError> {
        let key = id.key();
        let path = self.path(&key, "session");
        let _lock = Lock::take(&self.path(&key, "lock"))?;
        match self.read(&path)? {
            Some((found, _)) if found != *id => Err(SessionError::Refused {
                name: id.name().to_owned(),
                why: "its file names another session".to_owned(),
            }),
            Some((_, state)) if state.expired_at(now_ms()) => {
                self.bury(&key)?;
                Ok(Loaded::Expired)
            }
            Some((_, state)) => Ok(Loaded::State(state)),
            None => {
                let gone = self.path(&key, "gone");
                if gone.exists() {
                    fs::remove_file(&gone).map_err(store_error)?;
                    return Ok(Loaded::Expired);
                }
                Ok(Loaded::Empty)
            }
        }
    }

    /// Replaces the session `key`'s file by a mark that it is gone, which its next load reports.
    fn bury(&self, key: &str) -> Result<(), SessionError> {
        write_new(&self.path(key, "gone"), b"")?;
        match fs::remove_file(self.path(key, "session")) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(store_error(error)),
        }
    }

    fn save_now(
        &self,
        id: &SessionId,
        state: &SessionState,
        max_sessions: u64,
    ) -> Result<(), SessionError> {
        let key = id.key();
        let path = self.path(&key, "session");
        let encoded = self.encode(id, state)?;
        {
            let _lock = Lock::take(&self.path(&key, "lock"))?;
            let held = self.read(&path)?.map_or(0, |(_, held)| held.seq);
            if state.seq != held + 1 {
                return Err(SessionError::Conflict { name: id.name().to_owned() });
            }
            let temporary = self.path(&key, &format!("{}.new", std::process::id()));
            write_new(&temporary, &encoded)?;
            fs::rename(&temporary, &path).map_err(store_error)?;
            let _ = fs::remove_file(self.path(&key, "gone"));
        }
        self.evict(&key, max_sessions)
    }

    /// Evicts the least recently saved sessions past `max_sessions`, never `keep`.
    fn evict(&self, keep: &str, max_sessions: u64) -> Result<(), SessionError> {
        let mut files = Vec::new();
        for entry in fs::read_dir(&*self.dir).map_err(store_error)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(key) = name.strip_suffix(".session") else { continue };
            let modified = entry.metadata().and_then(|m| m.modified()).ok();
            files.push((modified, key.to_owned()));
        }
        let max = usize::try_from(max_sessions).unwrap_or(usize::MAX).max(1);
        if files.len() <= max {
            return Ok(());
        }
        files.sort();
        let excess = files.len() - max;
        for (modified, key) in files.into_iter().filter(|(_, key)| key != keep).take(excess) {
            let _lock = Lock::take(&self.path(&key, "lock"))?;
            // Saved again (or dropped) since it was listed: another writer's, not to evict.
            let path = self.path(&key, "session");
            if fs::metadata(&path).and_then(|m| m.modified()).ok() != modified || modified.is_none()
            {
                continue;
            }
            self.bury(&key)?;
        }
        Ok(())
    }

    /// The session's state as its file holds it, without forgetting one that expired (what
    /// `code-runtime session show` reads); `None` for none.
    ///
    /// # Errors
    ///
    /// As [`SessionStore::load`].
    pub fn peek(&self, id: &SessionId) -> Result<Option<SessionState>, SessionError> {
        let key = id.key();
        let _lock = Lock::take(&self.path(&key, "lock"))?;
        match self.read(&self.path(&key, "session"))? {
            Some((found, state)) if found == *id => Ok(Some(state)),
            Some(_) => Err(SessionError::Refused {
                name: id.name().to_owned(),
                why: "its file names another session".to_owned(),
            }),
            None => Ok(None),
        }
    }

    fn list_now(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let now = now_ms();
        let mut out = Vec::new();
        for entry in fs::read_dir(&*self.dir).map_err(store_error)?.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|extension| extension != "session") {
                continue;
            }
            // A file this host cannot read is not one of its sessions.
            if let Ok(Some((id, state))) = self.read(&path)
                && !state.expired_at(now)
            {
                out.push((state.saved_ms, SessionSummary::of(&id, &state, now)));
            }
        }
        out.sort_by_key(|(saved, _)| std::cmp::Reverse(*saved));
        Ok(out.into_iter().map(|(_, summary)| summary).collect())
    }

    fn remove_now(&self, id: &SessionId) -> Result<bool, SessionError> {
        let key = id.key();
        let _lock = Lock::take(&self.path(&key, "lock"))?;
        let _ = fs::remove_file(self.path(&key, "gone"));
        match fs::remove_file(self.path(&key, "session")) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(store_error(error)),
        }
    }
}

/// Runs `work` on one of the reactor's blocking threads: a session file may be as large as the
/// session's byte budget, and the executor that awaits it serves other runs.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SessionError> + Send + 'static,
) -> Result<T, SessionError> {
    let reactor = crate::reactor::handle().map_err(|why| SessionError::Store(why.into()))?;
    reactor
        .spawn_blocking(work)
        .await
        .map_err(|_| SessionError::Store("the session store's thread failed".into()))?
}

#[async_trait]
impl SessionStore for DirectorySessionStore {
    async fn load(&self, id: &SessionId) -> Result<Loaded, SessionError> {
        let (store, id) = (self.clone(), id.clone());
        blocking(move || store.load_now(&id)).await
    }

    async fn save(
        &self,
        id: &SessionId,
        state: SessionState,
        max_sessions: u64,
    ) -> Result<(), SessionError> {
        let (store, id) = (self.clone(), id.clone());
        blocking(move || store.save_now(&id, &state, max_sessions)).await
    }

    async fn take_turn(
        &self,
        id: &SessionId,
        within: Duration,
    ) -> Result<Option<TurnHold>, SessionError> {
        let path = self.path(&id.key(), "turn");
        let hold = blocking(move || Lock::wait_for(&path, within)).await?;
        Ok(Some(Box::new(hold)))
    }

    async fn remove(&self, id: &SessionId) -> Result<bool, SessionError> {
        let (store, id) = (self.clone(), id.clone());
        blocking(move || store.remove_now(&id)).await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let store = self.clone();
        blocking(move || store.list_now()).await
    }
}

/// Writes `bytes` to a new file at `path` (0600), replacing none: made under another name first
/// when it must replace one.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|error| SessionError::Store(format!("{}: {error}", path.display())))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(store_error)
}

fn store_error(error: impl std::fmt::Display) -> SessionError {
    SessionError::Store(error.to_string())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// An exclusive `flock` on a session's lock file, released when dropped (the file closes).
struct Lock {
    _file: File,
}

impl Lock {
    fn open(path: &Path) -> Result<File, SessionError> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|error| SessionError::Store(format!("{}: {error}", path.display())))
    }

    /// `flock(operation)` on `file`, again when a signal interrupted it: `Ok(false)` when a
    /// non-blocking one found the lock held.
    fn flock(file: &File, operation: libc::c_int) -> Result<bool, SessionError> {
        loop {
            // SAFETY: `flock` takes a descriptor the caller owns, open for the call.
            if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
                return Ok(true);
            }
            let error = std::io::Error::last_os_error();
            match error.kind() {
                std::io::ErrorKind::Interrupted => {}
                std::io::ErrorKind::WouldBlock => return Ok(false),
                _ => return Err(store_error(error)),
            }
        }
    }

    /// The lock on `path`, for a moment's work on a session's files.
    fn take(path: &Path) -> Result<Self, SessionError> {
        let file = Self::open(path)?;
        Self::flock(&file, libc::LOCK_EX)?;
        Ok(Self { _file: file })
    }

    /// The lock on `path`, held for a whole run, once another process's run lets go of it:
    /// looked at every few milliseconds for at most `within` (a waiting run that gives up
    /// leaves no thread blocked in the kernel behind it).
    fn wait_for(path: &Path, within: Duration) -> Result<Self, SessionError> {
        let file = Self::open(path)?;
        let deadline = std::time::Instant::now() + within;
        loop {
            if Self::flock(&file, libc::LOCK_EX | libc::LOCK_NB)? {
                return Ok(Self { _file: file });
            }
            if std::time::Instant::now() >= deadline {
                return Err(SessionError::Store(
                    "another process's run in the session did not finish in time".to_owned(),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_held_across_holders_until_dropped() {
        let dir = temp();
        let store = store(&dir);
        let path = store.path(&SessionId::new("a").key(), "turn");
        let held = Lock::wait_for(&path, Duration::from_secs(5)).unwrap();
        // Another open file description (another process's, in effect) waits, then gives up.
        let refused = Lock::wait_for(&path, Duration::from_millis(30));
        assert!(matches!(refused, Err(SessionError::Store(_))));
        drop(held);
        assert!(Lock::wait_for(&path, Duration::from_millis(30)).is_ok());
        fs::remove_dir_all(&dir).unwrap();
    }

    fn store(dir: &Path) -> DirectorySessionStore {
        DirectorySessionStore::open(dir, CheckpointKey::new([7u8; 32]).unwrap()).unwrap()
    }

    fn state(seq: u64) -> SessionState {
        SessionState {
            seq,
            run: seq,
            saved_ms: now_ms(),
            idle_ms: 3_600_000,
            values: vec![SessionValue {
                name: "x".into(),
                type_name: "int".into(),
                bytes: vec![0, 1, 2, 255],
            }],
            definitions: vec![Definition {
                names: vec!["f".into()],
                kind: "function".into(),
                source: "def f():\n    return 1\n".into(),
            }],
            ..SessionState::empty("python")
        }
    }

    fn temp() -> PathBuf {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cr-sessions-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_saved_state_reads_back_and_every_edit_is_refused() {
        let dir = temp();
        let store = store(&dir);
        let id = SessionId::new("a").owned_by("me");
        let saved = state(1);
        store.save_now(&id, &saved, 10).unwrap();
        assert_eq!(store.load_now(&id).unwrap(), Loaded::State(saved));
        let path = store.path(&id.key(), "session");
        let good = fs::read(&path).unwrap();
        for at in [0, MAGIC.len() + 3, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            fs::write(&path, &bad).unwrap();
            let loaded = store.load_now(&id);
            assert!(matches!(loaded, Err(SessionError::Refused { .. })), "{at}: {loaded:?}");
        }
        // Another key's file.
        fs::write(&path, &good).unwrap();
        let other =
            DirectorySessionStore::open(&dir, CheckpointKey::new([8u8; 32]).unwrap()).unwrap();
        assert!(matches!(other.load_now(&id), Err(SessionError::Refused { .. })));
        // The same file under another session's name.
        let elsewhere = SessionId::new("b").owned_by("me");
        fs::copy(&path, store.path(&elsewhere.key(), "session")).unwrap();
        assert!(matches!(store.load_now(&elsewhere), Err(SessionError::Refused { .. })));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_save_must_follow_the_state_held() {
        let dir = temp();
        let store = store(&dir);
        let id = SessionId::new("a");
        store.save_now(&id, &state(1), 10).unwrap();
        assert!(matches!(store.save_now(&id, &state(1), 10), Err(SessionError::Conflict { .. })));
        store.save_now(&id, &state(2), 10).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn past_the_count_the_oldest_is_evicted_and_its_next_run_told() {
        let dir = temp();
        let store = store(&dir);
        let ids: Vec<_> = (0..3).map(|n| SessionId::new(n.to_string())).collect();
        for id in &ids {
            store.save_now(id, &state(1), 2).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(store.list_now().unwrap().len(), 2);
        assert_eq!(store.load_now(&ids[0]).unwrap(), Loaded::Expired);
        assert_eq!(store.load_now(&ids[0]).unwrap(), Loaded::Empty);
        assert!(matches!(store.load_now(&ids[2]).unwrap(), Loaded::State(_)));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_are_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp();
        let store = DirectorySessionStore::open_with_own_key(&dir).unwrap();
        store.save_now(&SessionId::new("a"), &state(1), 10).unwrap();
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{:?}", entry.path());
        }
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        // The same directory opened again signs with the same key.
        let again = DirectorySessionStore::open_with_own_key(&dir).unwrap();
        assert!(matches!(again.load_now(&SessionId::new("a")).unwrap(), Loaded::State(_)));
        fs::remove_dir_all(&dir).unwrap();
    }
}

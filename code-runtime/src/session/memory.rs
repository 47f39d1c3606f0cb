//! [`MemorySessionStore`]: sessions in the host's memory, the default.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use super::state::{SessionId, SessionState, now_ms};
use super::store::{Loaded, SessionError, SessionStore, SessionSummary};

/// Sessions in this process's memory: gone when it exits. Sessions past the count a save allows,
/// or past the store's bytes ([`with_max_bytes`](Self::with_max_bytes), 1 GiB by default), are
/// evicted least recently saved first; one idle past its time is forgotten when it is next
/// loaded or another is saved. Either is [`Loaded::Expired`] to the next run that names it.
#[derive(Debug)]
pub struct MemorySessionStore {
    inner: Mutex<Inner>,
    max_bytes: u64,
}

impl Default for MemorySessionStore {
    fn default() -> Self {
        Self::with_max_bytes(Self::DEFAULT_MAX_BYTES)
    }
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<String, (SessionId, SessionState)>,
    /// What the sessions hold, as the byte budget counts them.
    bytes: u64,
    /// The keys of sessions evicted or expired, oldest first, so their next run says so; at most
    /// [`MAX_GONE`], so a flood of names cannot grow it.
    gone: VecDeque<String>,
}

/// How many gone sessions are remembered.
const MAX_GONE: usize = 10_000;

impl MemorySessionStore {
    /// What the sessions of a store may hold in all by default: a gibibyte.
    pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose sessions hold at most `max_bytes` in all (as `max_session_bytes`
    /// counts them): memory no run pays for while its session waits for the next.
    pub fn with_max_bytes(max_bytes: u64) -> Self {
        Self { inner: Mutex::default(), max_bytes }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The lock guards plain maps; a panic while holding it leaves them whole.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Inner {
    fn forget(&mut self, key: &str) {
        if let Some((_, state)) = self.sessions.remove(key) {
            self.bytes = self.bytes.saturating_sub(state.bytes());
            if self.gone.len() == MAX_GONE {
                self.gone.pop_front();
            }
            self.gone.push_back(key.to_owned());
        }
    }
}

#[async_trait]
impl SessionStore for MemorySessionStore {
    async fn load(&self, id: &SessionId) -> Result<Loaded, SessionError> {
        let key = id.key();
        let mut inner = self.inner();
        let expired = match inner.sessions.get(&key) {
            Some((_, state)) if !state.expired_at(now_ms()) => {
                return Ok(Loaded::State(state.clone()));
            }
            Some(_) => true,
            None => false,
        };
        if expired {
            inner.forget(&key);
        }
        match inner.gone.iter().position(|gone| *gone == key) {
            Some(at) => {
                inner.gone.remove(at);
                Ok(Loaded::Expired)
            }
            None => Ok(Loaded::Empty),
        }
    }

    async fn save(
        &self,
        id: &SessionId,
        state: SessionState,
        max_sessions: u64,
    ) -> Result<(), SessionError> {
        let key = id.key();
        let mut inner = self.inner();
        let held = inner.sessions.get(&key).map_or(0, |(_, held)| held.seq);
        if state.seq != held + 1 {
            return Err(SessionError::Conflict { name: id.name().to_owned() });
        }
        let bytes = state.bytes();
        if let Some((_, old)) = inner.sessions.insert(key.clone(), (id.clone(), state)) {
            inner.bytes = inner.bytes.saturating_sub(old.bytes());
        }
        inner.bytes = inner.bytes.saturating_add(bytes);
        // The idle go first, then the least recently saved while there are too many.
        let now = now_ms();
        let idle: Vec<String> = inner
            .sessions
            .iter()
            .filter(|(other, (_, state))| **other != key && state.expired_at(now))
            .map(|(other, _)| other.clone())
            .collect();
        for other in idle {
            inner.forget(&other);
        }
        let max = usize::try_from(max_sessions).unwrap_or(usize::MAX).max(1);
        while inner.sessions.len() > max || inner.bytes > self.max_bytes {
            let oldest = inner
                .sessions
                .iter()
                .filter(|(other, _)| **other != key)
                .min_by_key(|(_, (_, state))| state.saved_ms)
                .map(|(other, _)| other.clone());
            match oldest {
                Some(oldest) => inner.forget(&oldest),
                None => break,
            }
        }
        Ok(())
    }

    async fn remove(&self, id: &SessionId) -> Result<bool, SessionError> {
        let mut inner = self.inner();
        let Some((_, state)) = inner.sessions.remove(&id.key()) else { return Ok(false) };
        inner.bytes = inner.bytes.saturating_sub(state.bytes());
        Ok(true)
    }

    async fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let now = now_ms();
        let inner = self.inner();
        let mut held: Vec<_> =
            inner.sessions.values().filter(|(_, s)| !s.expired_at(now)).collect();
        held.sort_by_key(|(_, state)| std::cmp::Reverse(state.saved_ms));
        Ok(held.into_iter().map(|(id, state)| SessionSummary::of(id, state, now)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(seq: u64, bytes: usize) -> SessionState {
        SessionState {
            seq,
            idle_ms: 3_600_000,
            values: vec![super::super::SessionValue {
                name: "x".into(),
                type_name: "bytes".into(),
                bytes: vec![0; bytes],
            }],
            ..SessionState::empty("python")
        }
    }

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        futures::executor::block_on(future)
    }

    #[test]
    fn the_stores_bytes_are_bounded_and_the_oldest_go_first() {
        let store = MemorySessionStore::with_max_bytes(2_500);
        let ids: Vec<_> = (0..3).map(|n| SessionId::new(n.to_string())).collect();
        for id in &ids {
            run(store.save(id, state(1, 1_000), 100)).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(run(store.load(&ids[0])).unwrap(), Loaded::Expired);
        assert!(matches!(run(store.load(&ids[2])).unwrap(), Loaded::State(_)));
        assert!(run(store.remove(&ids[2])).unwrap());
        assert_eq!(store.inner().bytes, state(1, 1_000).bytes());
    }

    #[test]
    fn idle_sessions_are_swept_when_another_is_saved() {
        let store = MemorySessionStore::new();
        let idle = SessionState { idle_ms: 1, saved_ms: 1, ..state(1, 10) };
        run(store.save(&SessionId::new("idle"), idle, 100)).unwrap();
        run(store.save(&SessionId::new("busy"), state(1, 10), 100)).unwrap();
        assert_eq!(store.inner().sessions.len(), 1);
        assert_eq!(run(store.load(&SessionId::new("idle"))).unwrap(), Loaded::Expired);
    }
}

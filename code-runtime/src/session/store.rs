//! [`SessionStore`]: where sessions are kept between runs.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use super::state::{SessionId, SessionState};

/// Where a host keeps its sessions between runs. A store holds opaque states: it never reads a
/// value, and it refuses a save that does not follow the state it holds
/// ([`SessionError::Conflict`]), so two writers never both write one session.
///
/// [`MemorySessionStore`](super::MemorySessionStore) is the default;
/// [`DirectorySessionStore`](super::DirectorySessionStore) is shared by replicas.
#[async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// The session's state. A session idle past its time, or evicted to make room for others, is
    /// forgotten and answers [`Loaded::Expired`] once, so the run that finds it gone says so.
    async fn load(&self, id: &SessionId) -> Result<Loaded, SessionError>;

    /// Saves `state` as the session's, if the state it holds is the one `state` follows (its
    /// `seq` one less, or none for `seq` 1). When that makes more than `max_sessions`, the least
    /// recently saved others are evicted.
    async fn save(
        &self,
        id: &SessionId,
        state: SessionState,
        max_sessions: u64,
    ) -> Result<(), SessionError>;

    /// Takes the session's turn among the processes that share the store (replicas, the command
    /// line run twice at once), held until what it returns is dropped, waiting at most
    /// `within`: a run of the session in another process finishes first. A store only one
    /// process uses needs none (the default; within a process, [`Sessions`](super::Sessions)
    /// takes turns).
    async fn take_turn(
        &self,
        id: &SessionId,
        within: Duration,
    ) -> Result<Option<TurnHold>, SessionError> {
        let _ = (id, within);
        Ok(None)
    }

    /// Forgets the session; `false` when there was none.
    async fn remove(&self, id: &SessionId) -> Result<bool, SessionError>;

    /// The sessions it holds, most recently saved first.
    async fn list(&self) -> Result<Vec<SessionSummary>, SessionError>;
}

/// A store's hold on a session's turn ([`SessionStore::take_turn`]), released when dropped.
pub type TurnHold = Box<dyn std::any::Any + Send + Sync>;

/// What [`SessionStore::load`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// No such session: its first run.
    Empty,
    /// It was there and is gone: idle past its time, or evicted.
    Expired,
    /// Its state.
    State(SessionState),
}

/// One session of [`SessionStore::list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSummary {
    /// Its name.
    pub name: String,
    /// Its owner.
    pub owner: String,
    /// Its language.
    pub language: String,
    /// How many runs it has had.
    pub run: u64,
    /// Its size, as the byte budget counts it.
    pub bytes: u64,
    /// The names it carries: definitions' names, then values'.
    pub names: Vec<String>,
    /// Milliseconds until it expires.
    pub expires_in_ms: u64,
}

impl SessionSummary {
    /// The summary of `state`, the session `id`'s, at `now_ms`.
    pub fn of(id: &SessionId, state: &SessionState, now_ms: u64) -> Self {
        let definitions = state.definitions.iter().flat_map(|d| d.names.iter().cloned());
        let values = state.values.iter().map(|value| value.name.clone());
        Self {
            name: id.name().to_owned(),
            owner: id.owner().to_owned(),
            language: state.language.clone(),
            run: state.run,
            bytes: state.bytes(),
            names: definitions.chain(values).collect(),
            expires_in_ms: state.expires_in_ms(now_ms),
        }
    }
}

/// Why a store could not do what was asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Another run saved the session first (another replica, say): this run's state was not
    /// saved.
    #[error("another run saved session {name:?} first")]
    Conflict {
        /// The session's name.
        name: String,
    },
    /// The stored session is not one this host signed, or was changed since.
    #[error("session {name:?} was refused: {why}")]
    Refused {
        /// The session's name, or its file.
        name: String,
        /// Why.
        why: String,
    },
    /// The store failed (a file could not be read or written).
    #[error("the session store failed: {0}")]
    Store(String),
}

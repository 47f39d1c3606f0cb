//! [`Sessions`]: a store and the rule that a session has one run at a time; [`Turn`]: one run's
//! hold on its session, from the state it restores to the state it saves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use super::MemorySessionStore;
use super::report::{Kept, Restored, SessionReport};
use super::state::{Capture, SessionId, SessionState, now_ms};
use super::store::{Loaded, SessionError, SessionStore, TurnHold};
use crate::limits::Limits;

/// A [`SessionStore`] and the turns of its sessions: a run in a session waits until the one
/// before it in that session has saved (bounded by the waiting run's own wall clock). Cloning
/// shares both. Runtimes and requests that share a `Sessions` share its sessions.
#[derive(Clone, Debug)]
pub struct Sessions {
    store: Arc<dyn SessionStore>,
    turns: Arc<Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::in_memory()
    }
}

impl Sessions {
    /// Sessions in this process's memory ([`MemorySessionStore`]).
    pub fn in_memory() -> Self {
        Self::new(MemorySessionStore::new())
    }

    /// Sessions in `store`.
    pub fn new(store: impl SessionStore + 'static) -> Self {
        Self::shared(Arc::new(store))
    }

    /// Sessions in a store the host holds elsewhere too.
    pub fn shared(store: Arc<dyn SessionStore>) -> Self {
        Self { store, turns: Arc::default() }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The lock of `key`'s turns, made when no run holds or waits for it.
    fn lock(&self, key: String) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(lock) = turns.get(&key).and_then(Weak::upgrade) {
            return lock;
        }
        // Locks nobody holds are dropped as the map grows, so it stays as large as the runs in
        // sessions at once.
        if turns.len() >= 64 && turns.len().is_power_of_two() {
            turns.retain(|_, lock| lock.strong_count() > 0);
        }
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        turns.insert(key, Arc::downgrade(&lock));
        lock
    }

    /// Waits for the session's turn (in this process, then among those sharing the store, at
    /// most `within`), then loads its state. Cancel-safe: dropping the future gives up the place
    /// in line.
    ///
    /// # Errors
    ///
    /// The store failed or refused the session's state.
    pub(crate) async fn begin(
        &self,
        id: SessionId,
        language: &str,
        within: Duration,
    ) -> Result<Turn, SessionError> {
        let guard = self.lock(id.key()).lock_owned().await;
        let held = self.store.take_turn(&id, within).await?;
        let (state, restored) = match self.store.load(&id).await? {
            Loaded::Empty => (SessionState::empty(language), Restored::New),
            Loaded::Expired => (SessionState::empty(language), Restored::Expired),
            Loaded::State(state) => (state, Restored::Continued),
        };
        let state = Arc::new(state);
        Ok(Turn { sessions: self.clone(), id, _guard: (guard, held), state, restored })
    }
}

/// One run's hold on its session: nobody else runs in it until the turn is finished or dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    sessions: Sessions,
    id: SessionId,
    /// The turn in this process, and among the processes sharing the store.
    _guard: (OwnedMutexGuard<()>, Option<TurnHold>),
    state: Arc<SessionState>,
    restored: Restored,
}

impl Turn {
    /// The state the run restores.
    pub(crate) fn state(&self) -> &Arc<SessionState> {
        &self.state
    }

    /// The session's name.
    pub(crate) fn id(&self) -> &SessionId {
        &self.id
    }

    /// Saves what the run's cell captured (`Err`: it captured nothing, and why) and says what
    /// carries. A capture over `limits.max_session_bytes` keeps the state the run began
    /// with, and says so; the run itself is not failed.
    pub(crate) async fn finish(
        self,
        capture: Result<Capture, String>,
        limits: &Limits,
    ) -> SessionReport {
        let Turn { sessions, id, _guard, state: began, restored } = self;
        let mut began = Arc::unwrap_or_clone(began);
        let (mut dropped, mut unchanged) = (Vec::new(), None);
        // What the next run restores: the capture, or the state the run began with.
        let next = match capture.map(Capture::checked) {
            Ok(capture) if !capture.over_budget && capture.bytes() <= limits.max_session_bytes => {
                dropped = capture.dropped.into_iter().map(Into::into).collect();
                Some((capture.definitions, capture.values))
            }
            Ok(capture) => {
                dropped = capture.dropped.into_iter().map(Into::into).collect();
                unchanged = Some(format!(
                    "this run's state would pass max_session_bytes ({} bytes); the session \
                     keeps the state the run began with",
                    limits.max_session_bytes
                ));
                None
            }
            Err(why) => {
                unchanged = Some(format!("{why}; the session keeps the state the run began with"));
                None
            }
        };
        let run = began.run + 1;
        let before = report(&id, &began, (run, restored), Vec::new(), None);
        let mut saved = SessionState {
            seq: began.seq + 1,
            run,
            saved_ms: now_ms(),
            idle_ms: limits.session_idle_ms,
            language: began.language.clone(),
            definitions: Vec::new(),
            values: Vec::new(),
        };
        match next {
            Some((definitions, values)) => {
                (saved.definitions, saved.values) = (definitions, values)
            }
            None => {
                saved.definitions = std::mem::take(&mut began.definitions);
                saved.values = std::mem::take(&mut began.values);
            }
        }
        // What the result says is made before the state goes to the store, which keeps it.
        let mut said = report(&id, &saved, (run, restored), dropped, unchanged);
        if let Err(error) = sessions.store.save(&id, saved, limits.max_sessions).await {
            // The store holds what it held: the state the run began with (as far as this run
            // knows; another writer's, after a conflict).
            said.unchanged = Some(format!("this run's state was not saved: {error}"));
            (said.kept, said.bytes) = (before.kept, before.bytes);
        }
        said
    }
}

/// The most names a report lists as kept; past it, one more entry counts the rest.
const MAX_KEPT_LISTED: usize = 10_000;

fn report(
    id: &SessionId,
    state: &SessionState,
    (run, restored): (u64, Restored),
    dropped: Vec<super::DroppedName>,
    unchanged: Option<String>,
) -> SessionReport {
    let definitions = state.definitions.iter().flat_map(|definition| {
        definition.names.iter().map(|name| Kept {
            name: name.clone(),
            type_name: definition.kind.clone(),
            bytes: definition.source.len() as u64,
        })
    });
    let values = state.values.iter().map(|value| Kept {
        name: value.name.clone(),
        type_name: value.type_name.clone(),
        bytes: value.bytes.len() as u64,
    });
    let mut kept: Vec<Kept> = definitions.chain(values).collect();
    if kept.len() > MAX_KEPT_LISTED {
        let more = kept.len() - (MAX_KEPT_LISTED - 1);
        let bytes = kept[MAX_KEPT_LISTED - 1..].iter().map(|kept| kept.bytes).sum();
        kept.truncate(MAX_KEPT_LISTED - 1);
        kept.push(Kept { name: "…".to_owned(), type_name: format!("{more} more names"), bytes });
    }
    SessionReport {
        name: id.name().to_owned(),
        run,
        restored,
        kept,
        dropped,
        bytes: state.bytes(),
        expires_in_ms: state.idle_ms,
        unchanged,
    }
}

//! [`SessionReport`]: what a result says of its session.

use serde::{Deserialize, Serialize};

use super::state::Dropped;

/// What a run's result says of its session: which run of it this was, what its state was when
/// the run began, what carries to the next run and what does not, and when the session expires.
///
/// Serialized `{"name", "run", "restored", "kept": [{"name", "type", "bytes"}], "dropped":
/// [{"name", "why"}], "bytes", "expiresInMs"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionReport {
    /// The session's name.
    pub name: String,
    /// Which run of the session this was, from 1.
    pub run: u64,
    /// The state the run began with.
    pub restored: Restored,
    /// What carries to the next run: definitions, then values.
    pub kept: Vec<Kept>,
    /// What the run left that does not carry, and why.
    pub dropped: Vec<DroppedName>,
    /// The session's size, as `max_session_bytes` counts it.
    pub bytes: u64,
    /// Milliseconds until the session expires unless another run uses it.
    pub expires_in_ms: u64,
    /// Why the session's state is the one the run began with, when it is (the run was stopped
    /// before its state was captured, or its state would pass the byte budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchanged: Option<String>,
}

/// The state a session's run began with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restored {
    /// None: the session's first run. Serialized `new`.
    New,
    /// What the previous run kept. Serialized `continued`.
    Continued,
    /// None: the session was idle past its time or evicted, and this run starts it afresh.
    /// Serialized `expired`.
    Expired,
}

/// A name that carries to the next run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kept {
    /// The name.
    pub name: String,
    /// Its type (`function`, `class` and `import` for definitions).
    #[serde(rename = "type")]
    pub type_name: String,
    /// Its size: the serialized value's, or the definition's source.
    pub bytes: u64,
}

/// A name that does not carry, and why (the serde form of [`Dropped`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DroppedName {
    /// The name.
    pub name: String,
    /// Why.
    pub why: String,
}

impl From<Dropped> for DroppedName {
    fn from(dropped: Dropped) -> Self {
        Self { name: dropped.name, why: dropped.why }
    }
}

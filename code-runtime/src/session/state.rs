//! What a session holds: its [`SessionId`], the [`Capture`] a cell hands back when a run ends, and
//! the [`SessionState`] a store keeps. Every string and byte in them was made by a program: the
//! host bounds them ([`Capture::checked`]) and never looks inside a value.

use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::error::ContractError;

/// A session: the name a client gives it, and the owner it belongs to (an MCP client's session
/// and principal, say). Two owners naming the same session get two separate ones.
///
/// ```
/// use code_runtime::SessionId;
///
/// let mine = SessionId::new("analysis").owned_by("client-1");
/// let theirs = SessionId::new("analysis").owned_by("client-2");
/// assert_ne!(mine.key(), theirs.key());
/// assert_eq!(mine.name(), "analysis");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionId {
    name: String,
    owner: String,
}

impl SessionId {
    /// The longest name, in bytes.
    pub const MAX_NAME_BYTES: usize = 128;

    /// The session `name`, of no owner in particular (checked when a run names it: 1 to
    /// [`MAX_NAME_BYTES`](Self::MAX_NAME_BYTES) bytes, no control characters).
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), owner: String::new() }
    }

    /// The same name, belonging to `owner`.
    #[must_use]
    pub fn owned_by(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }

    /// The name its owner gave it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whose it is (empty for no owner in particular).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Owner and name as one key: 32 hex digits of their SHA-256, which a store may use as a
    /// file name whatever the name holds.
    pub fn key(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(self.owner.len().to_be_bytes());
        hash.update(self.owner.as_bytes());
        hash.update(self.name.as_bytes());
        crate::checkpoint::hex(&hash.finalize()[..16])
    }

    /// Whether a request may name it.
    pub(crate) fn check(&self) -> Result<(), ContractError> {
        let why = if self.name.is_empty() {
            Some("it is empty")
        } else if self.name.len() > Self::MAX_NAME_BYTES {
            Some("it is longer than 128 bytes")
        } else if self.name.chars().any(char::is_control) {
            Some("it holds a control character")
        } else {
            None
        };
        match why {
            Some(why) => Err(ContractError::UnusableSession {
                name: self.name.chars().take(Self::MAX_NAME_BYTES).collect(),
                why: why.to_owned(),
            }),
            None => Ok(()),
        }
    }
}

/// A top-level definition of an earlier run (an import, a function, a class), carried as its
/// source and replayed before the next program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    /// The names it binds.
    pub names: Vec<String>,
    /// What it is: `import`, `function` or `class`.
    pub kind: String,
    /// Its source text.
    pub source: String,
}

/// A top-level variable of an earlier run, as bytes its cell made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionValue {
    /// The variable's name.
    pub name: String,
    /// Its type, as the language names it (`DataFrame`, `Map`).
    pub type_name: String,
    /// What the cell serialized it to; never read by the host.
    pub bytes: Vec<u8>,
}

/// A name a run left that does not carry to the next, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The name.
    pub name: String,
    /// Why it does not carry (`an open file`, `pickle refused it: …`).
    pub why: String,
}

impl Dropped {
    /// `name` dropped because `why`.
    pub fn new(name: impl Into<String>, why: impl Into<String>) -> Self {
        Self { name: name.into(), why: why.into() }
    }
}

/// What a cell hands back when its program ends: the session's definitions and values as they
/// now stand (the restored ones included), and what it could not carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    /// Every definition, in the order to replay them.
    pub definitions: Vec<Definition>,
    /// Every value.
    pub values: Vec<SessionValue>,
    /// What did not carry.
    pub dropped: Vec<Dropped>,
    /// The cell found the whole over the session's byte budget and kept none of it.
    pub over_budget: bool,
}

/// The longest name or type a capture may hold, in bytes.
const MAX_NAME_BYTES: usize = 256;
/// The longest reason a capture may give, in bytes.
const MAX_WHY_BYTES: usize = 1024;
/// At most this many dropped names are listed; the rest are counted in one more entry.
const MAX_DROPPED: usize = 100;
/// What each name costs the byte budget besides its bytes: what the host holds for it.
pub(crate) const ENTRY_BYTES: u64 = 64;

impl Capture {
    /// Its size as the session's byte budget counts it: every value's bytes, name and type, and
    /// every definition's source and names, each with 64 more.
    pub fn bytes(&self) -> u64 {
        state_bytes(&self.definitions, &self.values)
    }

    /// The capture with what no honest cell sends cut out: names and types longer than 256 bytes
    /// and reasons longer than 1 KiB are clipped, and the dropped list keeps its first 100.
    pub(crate) fn checked(mut self) -> Self {
        for value in &mut self.values {
            clip(&mut value.name, MAX_NAME_BYTES);
            clip(&mut value.type_name, MAX_NAME_BYTES);
        }
        for definition in &mut self.definitions {
            for name in &mut definition.names {
                clip(name, MAX_NAME_BYTES);
            }
            clip(&mut definition.kind, MAX_NAME_BYTES);
        }
        for dropped in &mut self.dropped {
            clip(&mut dropped.name, MAX_NAME_BYTES);
            clip(&mut dropped.why, MAX_WHY_BYTES);
        }
        if self.dropped.len() > MAX_DROPPED {
            let more = self.dropped.len() - MAX_DROPPED + 1;
            self.dropped.truncate(MAX_DROPPED - 1);
            self.dropped.push(Dropped::new("…", format!("and {more} more names")));
        }
        self
    }
}

fn state_bytes(definitions: &[Definition], values: &[SessionValue]) -> u64 {
    let values = values.iter().map(|value| {
        (value.bytes.len() + value.name.len() + value.type_name.len()) as u64 + ENTRY_BYTES
    });
    let definitions = definitions.iter().map(|definition| {
        let names: usize = definition.names.iter().map(String::len).sum();
        (definition.source.len() + names + definition.kind.len()) as u64 + ENTRY_BYTES
    });
    values.chain(definitions).fold(0u64, u64::saturating_add)
}

/// Cuts `text` to at most `max` bytes, on a character boundary.
fn clip(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

/// A session as a store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionState {
    /// The language of its runs (`typescript`, `python`): a run in another is refused.
    pub language: String,
    /// How many times it was saved; a store refuses a save whose sequence number is not one past
    /// the one it holds, so two replicas never both write one session.
    pub seq: u64,
    /// How many runs it has had.
    pub run: u64,
    /// When it was last saved, in milliseconds since the Unix epoch.
    pub saved_ms: u64,
    /// How long it may stay idle after that, in milliseconds (the last run's `session_idle_ms`).
    pub idle_ms: u64,
    /// The definitions to replay, in order.
    pub definitions: Vec<Definition>,
    /// The values to restore.
    pub values: Vec<SessionValue>,
}

impl SessionState {
    /// An empty session of `language`, before its first run.
    pub fn empty(language: impl Into<String>) -> Self {
        Self {
            language: language.into(),
            seq: 0,
            run: 0,
            saved_ms: now_ms(),
            idle_ms: 0,
            definitions: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Its size as the byte budget counts it ([`Capture::bytes`]).
    pub fn bytes(&self) -> u64 {
        state_bytes(&self.definitions, &self.values)
    }

    /// Whether it has been idle past its time at `now_ms`.
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.idle_ms > 0 && now_ms.saturating_sub(self.saved_ms) >= self.idle_ms
    }

    /// Milliseconds until it expires, from `now_ms`.
    pub fn expires_in_ms(&self, now_ms: u64) -> u64 {
        self.saved_ms.saturating_add(self.idle_ms).saturating_sub(now_ms)
    }

    /// A SHA-256 of its definitions and values (not of when it was saved): the state a run started
    /// from, as a checkpoint records it.
    pub fn digest(&self) -> String {
        let mut hash = Sha256::new();
        let mut part = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        part(self.language.as_bytes());
        for definition in &self.definitions {
            for name in &definition.names {
                part(name.as_bytes());
            }
            part(definition.kind.as_bytes());
            part(definition.source.as_bytes());
        }
        for value in &self.values {
            part(value.name.as_bytes());
            part(value.type_name.as_bytes());
            part(&value.bytes);
        }
        crate::checkpoint::hex(&hash.finalize())
    }
}

/// Now, in milliseconds since the Unix epoch (0 on a clock set before it).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(SessionId::new("analysis-1 of the CSV").check().is_ok());
        for bad in [String::new(), "a\nb".to_owned(), "x".repeat(129)] {
            assert!(SessionId::new(bad).check().is_err());
        }
    }

    #[test]
    fn owner_and_name_cannot_be_confused() {
        let a = SessionId::new("bc").owned_by("a");
        let b = SessionId::new("c").owned_by("ab");
        assert_ne!(a.key(), b.key());
        assert_eq!(a.key().len(), 32);
    }

    #[test]
    fn a_capture_from_a_forger_is_clipped() {
        let capture = Capture {
            values: vec![SessionValue {
                name: "é".repeat(200),
                type_name: "t".into(),
                bytes: vec![1; 10],
            }],
            dropped: (0..500).map(|n| Dropped::new(n.to_string(), "x".repeat(5000))).collect(),
            ..Capture::default()
        }
        .checked();
        assert!(capture.values[0].name.len() <= 256);
        assert_eq!(capture.dropped.len(), 100);
        assert!(capture.dropped[0].why.len() <= 1024);
        assert_eq!(capture.dropped[99].why, "and 401 more names");
    }

    #[test]
    fn expiry_counts_from_the_last_save() {
        let state = SessionState { saved_ms: 1_000, idle_ms: 500, ..SessionState::empty("python") };
        assert!(!state.expired_at(1_499));
        assert!(state.expired_at(1_500));
        assert_eq!(state.expires_in_ms(1_200), 300);
    }
}

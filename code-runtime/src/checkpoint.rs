//! Checkpoints: a paused run as plain data, signed so that only a holder of the host's key can
//! make one a runtime will resume ([`Checkpoint`], [`CheckpointKey`], [`Decisions`]).
//!
//! A checkpoint is a JSON object `{"format": 1, "body": {…}, "mac": "<hex>"}`. The body holds the
//! program, its language, a fingerprint of the bindings, every call the program made in order
//! (with its argument and, when it settled, its answer), the logs so far, and the run's seed and
//! clock readings. The MAC is HMAC-SHA-256 under the host's key over the body's compact JSON
//! text, as [`json::encode`](crate::json::encode) writes it; a body read back is encoded again
//! before it is checked, so a change of spacing or key spelling that keeps the value is harmless
//! and any change of the value is refused.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::approval::Decision;
use crate::binding::BindingError;
use crate::json::{self, JsonArray, JsonMap, JsonValue};

/// The checkpoint format this crate writes and reads.
const FORMAT: u64 = 1;

/// What the MAC covers besides the body, so a MAC made for anything else never verifies here.
const DOMAIN: &[u8] = b"code-runtime checkpoint 1\n";

/// The largest checkpoint text [`Checkpoint::from_json`] reads: 1 GiB.
pub const MAX_CHECKPOINT_BYTES: usize = 1 << 30;

type HmacSha256 = Hmac<Sha256>;

/// The secret a host signs checkpoints with: at least 16 bytes. Any process or machine holding
/// it can resume the host's checkpoints, and nobody without it can make one.
#[derive(Clone, PartialEq, Eq)]
pub struct CheckpointKey(Vec<u8>);

impl CheckpointKey {
    /// The fewest bytes a key has.
    pub const MIN_BYTES: usize = 16;

    /// A key of `bytes`.
    ///
    /// # Errors
    ///
    /// Fewer than [`MIN_BYTES`](Self::MIN_BYTES) bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, CheckpointError> {
        let bytes = bytes.into();
        if bytes.len() < Self::MIN_BYTES {
            return Err(CheckpointError::WeakKey { bytes: bytes.len() });
        }
        Ok(Self(bytes))
    }

    /// A key written in hexadecimal (surrounding whitespace ignored).
    ///
    /// # Errors
    ///
    /// Text that is not an even number of hex digits, or a key shorter than
    /// [`MIN_BYTES`](Self::MIN_BYTES).
    pub fn from_hex(text: &str) -> Result<Self, CheckpointError> {
        Self::new(unhex(text.trim()).ok_or(CheckpointError::KeyNotHex)?)
    }

    /// A fresh 32-byte key from the operating system's random source.
    ///
    /// # Errors
    ///
    /// The source failed.
    pub fn generate() -> Result<Self, CheckpointError> {
        let mut bytes = vec![0u8; 32];
        getrandom::fill(&mut bytes).map_err(|error| CheckpointError::Random(error.to_string()))?;
        Ok(Self(bytes))
    }

    /// The key in hexadecimal, to store it.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// The MAC of `body` under this key, for a purpose `domain` names (a session file, say), so a
    /// MAC made for one purpose never verifies for another.
    pub(crate) fn mac_of(&self, domain: &[u8], body: &[u8]) -> Vec<u8> {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(domain);
        mac.update(body);
        mac.finalize().into_bytes().to_vec()
    }

    fn mac(&self, body: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(DOMAIN);
        mac.update(body.as_bytes());
        mac
    }
}

impl fmt::Debug for CheckpointKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CheckpointKey({} bytes)", self.0.len())
    }
}

/// Why a checkpoint or a key was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The text is not a checkpoint at all.
    #[error("not a checkpoint: {0}")]
    Malformed(String),
    /// A format this crate does not read.
    #[error("checkpoint format {0} is not supported (this runtime reads format 1)")]
    Format(u64),
    /// The MAC does not verify: the checkpoint was edited, forged, or signed with another key.
    #[error(
        "the checkpoint's signature does not verify: it was edited, or signed with another key"
    )]
    Forged,
    /// The checkpoint is of a program in another language.
    #[error("the checkpoint is of a {checkpoint} program, and this runtime runs {runtime}")]
    OtherLanguage {
        /// The checkpoint's language.
        checkpoint: String,
        /// The runtime's.
        runtime: String,
    },
    /// The request's bindings are not those the checkpoint was made with.
    #[error("the checkpoint was made with other bindings (its fingerprint differs)")]
    OtherBindings,
    /// The request names a program, and it is not the checkpoint's.
    #[error("the request's program is not the checkpoint's")]
    OtherProgram,
    /// The request runs in another session than the one the paused run was in (or in one when
    /// the paused run was in none, or in none when it was in one).
    #[error(
        "the checkpoint's run was in session {checkpoint:?}, and the request is in {request:?}"
    )]
    OtherSession {
        /// The paused run's session (empty for none).
        checkpoint: String,
        /// The request's (empty for none).
        request: String,
    },
    /// The session's state is not the one the paused run began with (another run in the session
    /// saved since): replaying the program against it would not be exact.
    #[error(
        "session {0:?} has changed since the run paused (another run in it saved a new state); the resume would not replay the same program"
    )]
    SessionChanged(String),
    /// A decision for a call the checkpoint does not hold as pending.
    #[error("decision for call {0}, which is not a pending call of the checkpoint")]
    NotPending(u64),
    /// A request resumes a checkpoint without a key to check it with.
    #[error("resuming needs the checkpoint key (Approvals::checkpoint_key)")]
    NoKey,
    /// A key shorter than [`CheckpointKey::MIN_BYTES`].
    #[error("a checkpoint key needs at least 16 bytes, got {bytes}")]
    WeakKey {
        /// How many bytes it had.
        bytes: usize,
    },
    /// A key that is not hexadecimal.
    #[error("a checkpoint key must be hexadecimal")]
    KeyNotHex,
    /// The random source failed.
    #[error("no random bytes for a key: {0}")]
    Random(String),
    /// The checkpoint was resumed already: its decisions are usable once (a run that paused
    /// again has a checkpoint of its own, which is the one to resume).
    #[error(
        "the checkpoint was resumed already: a checkpoint's decisions are usable once (resume the checkpoint the resumed run paused with, if it paused again)"
    )]
    Resumed,
    /// The store of resumed checkpoints could not say whether this one was: refused, as
    /// resuming twice could make a call twice.
    #[error("cannot tell whether the checkpoint was resumed already: {0}")]
    Unspendable(String),
}

/// Which checkpoints were resumed: each is resumed once, so a decision is never used twice
/// (a replayed `resume` with `allow` would make the allowed call again). The default,
/// [`spent_in_process`], remembers the checkpoints this process resumed; hosts that resume
/// in more than one process (replicas sharing a key, a command line run again) give
/// [`Approvals::spent_checkpoints`](crate::Approvals::spent_checkpoints) a store they share.
pub trait SpentCheckpoints: Send + Sync {
    /// Marks the checkpoint whose [`signature`](Checkpoint::signature) is `signature` resumed,
    /// atomically: `Ok(true)` the first time, `Ok(false)` every later time, `Err` when the store
    /// cannot tell (the resume is refused).
    fn spend(&self, signature: &str) -> Result<bool, String>;
}

/// The checkpoints this process resumed, shared by every runtime in it.
pub fn spent_in_process() -> Arc<dyn SpentCheckpoints> {
    static SPENT: OnceLock<Arc<InProcess>> = OnceLock::new();
    SPENT.get_or_init(|| Arc::new(InProcess::default())).clone()
}

/// [`spent_in_process`]'s store: 32 bytes per resumed checkpoint, for the process's life.
#[derive(Default)]
struct InProcess(Mutex<HashSet<String>>);

impl SpentCheckpoints for InProcess {
    fn spend(&self, signature: &str) -> Result<bool, String> {
        Ok(self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(signature.to_owned()))
    }
}

/// A paused run: what [`resume`](crate::CodeRuntime::resume) needs to continue it, signed.
///
/// Plain data: it serializes (serde, or [`to_json`](Checkpoint::to_json)) to keep it anywhere,
/// and reads back with [`from_json`](Checkpoint::from_json). Its readers
/// ([`pending`](Checkpoint::pending), [`language`](Checkpoint::language)) read it unverified;
/// a runtime checks the signature before it runs anything.
#[derive(Clone)]
pub struct Checkpoint {
    body: JsonValue,
    mac: [u8; 32],
}

/// Equal when they sign the same text: a number read as an integer and the same number read as
/// a double are one checkpoint.
impl PartialEq for Checkpoint {
    fn eq(&self, other: &Self) -> bool {
        self.mac == other.mac && json::encode(&self.body) == json::encode(&other.body)
    }
}

impl Checkpoint {
    pub(crate) fn sign(record: &Record, key: &CheckpointKey) -> Self {
        let body = record.to_body();
        let mac = key.mac(&json::encode(&body)).finalize().into_bytes().into();
        Self { body, mac }
    }

    /// The record inside, once the MAC verifies under `key`.
    pub(crate) fn open(&self, key: &CheckpointKey) -> Result<Record, CheckpointError> {
        key.mac(&json::encode(&self.body))
            .verify_slice(&self.mac)
            .map_err(|_| CheckpointError::Forged)?;
        Record::from_body(&self.body)
    }

    /// The checkpoint as JSON text, `{"format":1,"body":{…},"mac":"…"}`.
    pub fn to_json(&self) -> String {
        json::encode(&self.to_value())
    }

    fn to_value(&self) -> JsonValue {
        crate::json!({ "format": FORMAT, "body": self.body.clone(), "mac": hex(&self.mac) })
    }

    /// Reads a checkpoint from its JSON text, without verifying it.
    ///
    /// # Errors
    ///
    /// Text over [`MAX_CHECKPOINT_BYTES`], that is not JSON, or not a checkpoint of format 1.
    pub fn from_json(text: &str) -> Result<Self, CheckpointError> {
        if text.len() > MAX_CHECKPOINT_BYTES {
            return Err(CheckpointError::Malformed(format!(
                "it is longer than {MAX_CHECKPOINT_BYTES} bytes"
            )));
        }
        let value =
            json::parse(text).map_err(|error| CheckpointError::Malformed(error.to_string()))?;
        Self::from_value(value)
    }

    fn from_value(mut value: JsonValue) -> Result<Self, CheckpointError> {
        let malformed = |why: &str| CheckpointError::Malformed(why.to_owned());
        let object = value.as_object_mut().ok_or_else(|| malformed("not a JSON object"))?;
        let format = object.get("format").and_then(JsonValue::as_u64);
        match format {
            Some(FORMAT) => {}
            Some(other) => return Err(CheckpointError::Format(other)),
            None => return Err(malformed("no format")),
        }
        let mac = object
            .get("mac")
            .and_then(JsonValue::as_str)
            .and_then(unhex)
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or_else(|| malformed("no 32-byte hexadecimal mac"))?;
        let body = object.remove("body").filter(JsonValue::is_object);
        let body = body.ok_or_else(|| malformed("no body object"))?;
        Ok(Self { body, mac })
    }

    /// The checkpoint's identity: its MAC in hexadecimal, unique to its body and key, what
    /// [`SpentCheckpoints`] remember.
    pub fn signature(&self) -> String {
        hex(&self.mac)
    }

    /// The language of the paused program, as the checkpoint says (unverified).
    pub fn language(&self) -> Option<&str> {
        self.body.get("language").and_then(JsonValue::as_str)
    }

    /// The session the paused run was in, as the checkpoint says (unverified): a resume runs in
    /// it.
    pub fn session(&self) -> Option<&str> {
        self.body.get("session")?.get("name")?.as_str()
    }

    /// The calls waiting for a decision, as the checkpoint says (unverified).
    pub fn pending(&self) -> Vec<PendingCall> {
        Record::from_body(&self.body).map(|record| record.pending()).unwrap_or_default()
    }
}

impl fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checkpoint")
            .field("language", &self.language())
            .field("pending", &self.pending().len())
            .finish_non_exhaustive()
    }
}

impl serde::Serialize for Checkpoint {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Checkpoint {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = JsonValue::deserialize(deserializer)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

/// A call of a paused run that waits for a decision.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct PendingCall {
    /// Its number in the run (the program's `id`th call), which [`Decisions`] name.
    pub id: u64,
    /// The namespace's `global`.
    pub namespace: String,
    /// The function's name.
    pub function: String,
    /// The argument.
    pub args: JsonValue,
}

/// A run that paused: its signed checkpoint, and the calls that wait for a decision.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Paused {
    /// What [`resume`](crate::CodeRuntime::resume) continues it from.
    pub checkpoint: Checkpoint,
    /// The calls to decide, in call order.
    pub pending: Vec<PendingCall>,
}

/// The decisions a resume applies to a checkpoint's pending calls, by call number. A pending
/// call with no decision is asked of the request's approver again (or denied, without one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    /// [`Decision::Allow`] or [`Decision::Deny`], never [`Decision::Pause`].
    pub(crate) by_call: BTreeMap<u64, Decision>,
}

impl Decisions {
    /// No decisions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Allows call `id`.
    #[must_use]
    pub fn allow(mut self, id: u64) -> Self {
        self.by_call.insert(id, Decision::Allow);
        self
    }

    /// Denies call `id` with `reason`.
    #[must_use]
    pub fn deny(mut self, id: u64, reason: impl Into<String>) -> Self {
        self.by_call.insert(id, Decision::deny(reason));
        self
    }

    /// The decision on call `id`: [`Decision::Allow`] or [`Decision::Deny`].
    pub fn get(&self, id: u64) -> Option<&Decision> {
        self.by_call.get(&id)
    }
}

/// What a paused run is, unsigned: the body of a checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Record {
    pub(crate) language: String,
    pub(crate) program: String,
    /// [`fingerprint`] of the bindings.
    pub(crate) bindings: String,
    /// The seed of the program's randomness.
    pub(crate) seed: u64,
    /// The program's clock when it started, in milliseconds since the Unix epoch.
    pub(crate) started_ms: f64,
    /// Every call the program made, in call order: call `n` is at `n - 1`.
    pub(crate) calls: Vec<RecordedCall>,
    pub(crate) logs: Vec<String>,
    /// The session the run was in, and the digest of the state it began with
    /// ([`SessionState::digest`](crate::SessionState::digest)).
    pub(crate) session: Option<(String, String)>,
}

/// One call of a [`Record`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecordedCall {
    pub(crate) namespace: String,
    pub(crate) function: String,
    pub(crate) args: JsonValue,
    pub(crate) state: CallState,
}

/// What became of a recorded call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CallState {
    /// It was answered: the `rank`th answer the program got, at `at_ms` on its clock.
    /// `counted` when it counted against the call budgets (a budget's own refusal does not).
    Settled { outcome: Result<JsonValue, BindingError>, rank: u64, at_ms: f64, counted: bool },
    /// It waits for a decision.
    Pending,
    /// It was made and never answered (its run paused first): a resume makes it again, live.
    Dropped,
}

impl Record {
    pub(crate) fn pending(&self) -> Vec<PendingCall> {
        self.calls
            .iter()
            .zip(1u64..)
            .filter(|(call, _)| call.state == CallState::Pending)
            .map(|(call, id)| PendingCall {
                id,
                namespace: call.namespace.clone(),
                function: call.function.clone(),
                args: call.args.clone(),
            })
            .collect()
    }

    fn to_body(&self) -> JsonValue {
        let calls: JsonArray = self.calls.iter().map(RecordedCall::to_value).collect();
        let mut body = crate::json!({
            "language": self.language,
            "program": self.program,
            "bindings": self.bindings,
            "seed": format!("{:016x}", self.seed),
            "startedMs": self.started_ms,
            "calls": calls,
            "logs": self.logs,
        });
        if let Some((name, state)) = &self.session {
            body["session"] = crate::json!({"name": name, "state": state});
        }
        body
    }

    fn from_body(body: &JsonValue) -> Result<Self, CheckpointError> {
        let text = |key: &str| {
            body.get(key)
                .and_then(JsonValue::as_str)
                .map(str::to_owned)
                .ok_or_else(|| malformed(&format!("no string {key:?}")))
        };
        let seed = u64::from_str_radix(&text("seed")?, 16)
            .map_err(|_| malformed("the seed is not 16 hex digits"))?;
        let started_ms = body
            .get("startedMs")
            .and_then(JsonValue::as_f64)
            .ok_or_else(|| malformed("no number \"startedMs\""))?;
        let calls = body
            .get("calls")
            .and_then(JsonValue::as_array)
            .ok_or_else(|| malformed("no array \"calls\""))?
            .iter()
            .map(RecordedCall::from_value)
            .collect::<Result<_, _>>()?;
        let logs = body
            .get("logs")
            .and_then(JsonValue::as_array)
            .ok_or_else(|| malformed("no array \"logs\""))?
            .iter()
            .map(|line| line.as_str().map(str::to_owned).ok_or_else(|| malformed("a log")))
            .collect::<Result<_, _>>()?;
        let session = match body.get("session") {
            None => None,
            Some(session) => {
                let field = |key: &str| session.get(key).and_then(JsonValue::as_str);
                let (Some(name), Some(state)) = (field("name"), field("state")) else {
                    return Err(malformed("a session without a string name and state"));
                };
                Some((name.to_owned(), state.to_owned()))
            }
        };
        Ok(Self {
            language: text("language")?,
            program: text("program")?,
            bindings: text("bindings")?,
            seed,
            started_ms,
            calls,
            logs,
            session,
        })
    }
}

fn malformed(why: &str) -> CheckpointError {
    CheckpointError::Malformed(why.to_owned())
}

impl RecordedCall {
    fn to_value(&self) -> JsonValue {
        let mut call = JsonMap::new();
        call.insert("namespace", self.namespace.as_str().into());
        call.insert("function", self.function.as_str().into());
        call.insert("args", self.args.clone());
        match &self.state {
            CallState::Settled { outcome, rank, at_ms, counted } => {
                call.insert("state", "settled".into());
                call.insert("rank", (*rank).into());
                call.insert("atMs", (*at_ms).into());
                call.insert("counted", (*counted).into());
                match outcome {
                    Ok(value) => call.insert("ok", value.clone()),
                    Err(error) => call.insert(
                        "error",
                        crate::json!({ "message": error.message(), "data": error.data().cloned() }),
                    ),
                };
            }
            CallState::Pending => {
                call.insert("state", "pending".into());
            }
            CallState::Dropped => {
                call.insert("state", "dropped".into());
            }
        }
        call.into()
    }

    fn from_value(value: &JsonValue) -> Result<Self, CheckpointError> {
        let text = |key: &str| {
            value
                .get(key)
                .and_then(JsonValue::as_str)
                .map(str::to_owned)
                .ok_or_else(|| malformed(&format!("a call without a string {key:?}")))
        };
        let state = match text("state")?.as_str() {
            "pending" => CallState::Pending,
            "dropped" => CallState::Dropped,
            "settled" => {
                let outcome = match (value.get("ok"), value.get("error")) {
                    (Some(ok), None) => Ok(ok.clone()),
                    (None, Some(error)) => {
                        let message = error.get("message").and_then(JsonValue::as_str);
                        let message = message.ok_or_else(|| malformed("an error's message"))?;
                        let rejection = BindingError::new(message);
                        Err(match error.get("data") {
                            Some(JsonValue::Null) | None => rejection,
                            Some(data) => rejection.with_data(data.clone()),
                        })
                    }
                    _ => return Err(malformed("a settled call without one of ok and error")),
                };
                CallState::Settled {
                    outcome,
                    rank: value
                        .get("rank")
                        .and_then(JsonValue::as_u64)
                        .ok_or_else(|| malformed("a settled call's rank"))?,
                    at_ms: value
                        .get("atMs")
                        .and_then(JsonValue::as_f64)
                        .ok_or_else(|| malformed("a settled call's atMs"))?,
                    counted: value.get("counted").and_then(JsonValue::as_bool).unwrap_or(true),
                }
            }
            other => return Err(malformed(&format!("a call in state {other:?}"))),
        };
        Ok(Self {
            namespace: text("namespace")?,
            function: text("function")?,
            args: value.get("args").cloned().unwrap_or_default(),
            state,
        })
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.is_ascii() {
        return None;
    }
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(&text[at..at + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            language: "typescript".to_owned(),
            program: "return 1".to_owned(),
            bindings: "ab".repeat(32),
            seed: 0xdead_beef_0123_4567,
            started_ms: 1_700_000_000_000.5,
            calls: vec![
                RecordedCall {
                    namespace: "tools".to_owned(),
                    function: "echo".to_owned(),
                    args: crate::json!({ "x": [1, 2.5, "é"] }),
                    state: CallState::Settled {
                        outcome: Ok(crate::json!({ "y": null })),
                        rank: 0,
                        at_ms: 1_700_000_000_001.25,
                        counted: true,
                    },
                },
                RecordedCall {
                    namespace: "tools".to_owned(),
                    function: "fail".to_owned(),
                    args: JsonValue::Null,
                    state: CallState::Settled {
                        outcome: Err(BindingError::new("no").with_data(crate::json!({"s": 1}))),
                        rank: 1,
                        at_ms: 1_700_000_000_002.0,
                        counted: false,
                    },
                },
                RecordedCall {
                    namespace: "gh".to_owned(),
                    function: "delete_repo".to_owned(),
                    args: crate::json!({ "name": "infra" }),
                    state: CallState::Pending,
                },
                RecordedCall {
                    namespace: "tools".to_owned(),
                    function: "slow".to_owned(),
                    args: JsonValue::Null,
                    state: CallState::Dropped,
                },
            ],
            logs: vec!["a".to_owned(), "\u{0}b".to_owned()],
            session: Some(("analysis".to_owned(), "cd".repeat(32))),
        }
    }

    fn key(byte: u8) -> CheckpointKey {
        CheckpointKey::new(vec![byte; 32]).unwrap()
    }

    #[test]
    fn a_signed_record_reads_back_whole_through_its_text() {
        let checkpoint = Checkpoint::sign(&record(), &key(7));
        let text = checkpoint.to_json();
        let read = Checkpoint::from_json(&text).unwrap();
        assert_eq!(read, checkpoint);
        assert_eq!(read.open(&key(7)).unwrap(), record());
        assert_eq!(read.language(), Some("typescript"));
        let pending = read.pending();
        assert_eq!(pending.len(), 1);
        assert_eq!((pending[0].id, pending[0].function.as_str()), (3, "delete_repo"));
        let through_serde: Checkpoint =
            serde_json::from_str(&serde_json::to_string(&checkpoint).unwrap()).unwrap();
        assert_eq!(through_serde, checkpoint);
        assert_eq!(through_serde.open(&key(7)).unwrap(), record());
    }

    #[test]
    fn every_changed_byte_of_the_body_or_the_mac_is_refused() {
        let text = Checkpoint::sign(&record(), &key(7)).to_json();
        let mut refused = 0;
        for at in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[at] ^= 0x01;
            let Ok(edited) = String::from_utf8(bytes) else { continue };
            match Checkpoint::from_json(&edited) {
                // A flip that still parses to the same value (none here) would be harmless.
                Ok(read) => {
                    let opened = read.open(&key(7));
                    assert!(opened.is_err() || opened.unwrap() == record(), "byte {at} accepted");
                    refused += 1;
                }
                Err(_) => refused += 1,
            }
        }
        assert!(refused > 100);
    }

    #[test]
    fn another_key_or_a_spliced_body_does_not_verify() {
        let signed = Checkpoint::sign(&record(), &key(7));
        assert_eq!(signed.open(&key(8)), Err(CheckpointError::Forged));
        let mut other = record();
        other.program = "return 2".to_owned();
        let spliced = Checkpoint { body: other.to_body(), mac: signed.mac };
        assert_eq!(spliced.open(&key(7)), Err(CheckpointError::Forged));
    }

    #[test]
    fn keys_are_checked_and_hidden() {
        assert_eq!(CheckpointKey::new(vec![1; 15]), Err(CheckpointError::WeakKey { bytes: 15 }));
        assert_eq!(CheckpointKey::from_hex("zz"), Err(CheckpointError::KeyNotHex));
        let key = CheckpointKey::generate().unwrap();
        assert_eq!(CheckpointKey::from_hex(&format!(" {}\n", key.to_hex())).unwrap(), key);
        assert_eq!(format!("{key:?}"), "CheckpointKey(32 bytes)");
    }

    #[test]
    fn malformed_checkpoints_say_why() {
        for (text, why) in [
            ("[]", "not a JSON object"),
            (r#"{"format":2}"#, "format 2"),
            (r#"{"format":1,"mac":"00"}"#, "mac"),
            ("{", "not a checkpoint"),
        ] {
            let error = Checkpoint::from_json(text).unwrap_err().to_string();
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn decisions_read_back() {
        let decisions = Decisions::new().allow(2).deny(3, "no");
        assert_eq!(decisions.get(2), Some(&Decision::Allow));
        assert_eq!(decisions.get(3), Some(&Decision::deny("no")));
        assert_eq!(decisions.get(4), None);
    }
}

//! What a run produced: [`CodeRunResult`], its [`CodeRunFailure`], the six [`FailureKind`]s, and
//! the catalogue of exact failure messages every provider uses (crate-private: a provider reaches
//! them only through [`provider::Ending`](crate::provider::Ending) and the output ledger).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::checkpoint::Paused;
use crate::json::{self, JsonValue};
use crate::session::SessionReport;

/// The outcome of one run: what the program printed, and either what it returned or why it failed.
///
/// Built only by the output ledger ([`provider::OutputLedger::settle`](crate::provider::OutputLedger::settle))
/// or by deserializing, so every result a provider hands out has passed the output budget.
///
/// Invariants, upheld by the ledger and checked when deserializing:
///
/// - `value` and `error` never coexist;
/// - `value` is absent when the program returned nothing (`undefined` / `None`); a returned `null`
///   is `Some(JsonValue::Null)`;
/// - every string in `logs` and the value (or the error message) together fit the provider's
///   output budget (see [`OutputLedger`](crate::provider::OutputLedger)).
///
/// The serde form is the reference JSON shape: `{"logs":[…],"value":…}` on success (no `value`
/// key when there is none), `{"logs":[…],"error":{"kind":…,"message":…}}` on failure.
/// [`CodeRunResult::to_json`] writes that same form in JavaScript's number spelling; serde's path
/// follows [`JsonValue`]'s `Serialize`. A 1 000 000-deep value is safe to hold, copy, print and
/// drop, as every [`JsonValue`] is.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "RawResult")]
pub struct CodeRunResult {
    logs: Vec<String>,
    value: Option<JsonValue>,
    error: Option<CodeRunFailure>,
    paused: Option<Box<Paused>>,
    truncated: Option<Truncated>,
    session: Option<Box<SessionReport>>,
}

/// How much a result was shrunk ([`CodeRunRequest::truncate`](crate::CodeRunRequest::truncate)):
/// its output's size before and after, counted as the output budget counts.
/// Serialized `{"fromBytes": N, "toBytes": N}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Truncated {
    /// The output's size as the program produced it.
    pub from_bytes: u64,
    /// Its size as handed back.
    pub to_bytes: u64,
}

impl CodeRunResult {
    /// A run that completed, with its logs and its value (`None` when it returned nothing).
    /// Checks nothing: the ledger has.
    pub(crate) fn completed(logs: Vec<String>, value: Option<JsonValue>) -> Self {
        Self { logs, value, error: None, paused: None, truncated: None, session: None }
    }

    /// A run that failed.
    pub(crate) fn failed(logs: Vec<String>, error: CodeRunFailure) -> Self {
        Self { logs, value: None, error: Some(error), paused: None, truncated: None, session: None }
    }

    /// A run that paused for a decision.
    pub(crate) fn paused_with(logs: Vec<String>, paused: Paused) -> Self {
        Self {
            logs,
            value: None,
            error: None,
            paused: Some(Box::new(paused)),
            truncated: None,
            session: None,
        }
    }

    /// The same result with its logs, value and message replaced by shrunk ones, saying how
    /// much it was shrunk. The ledger's ([`provider::shrink_result`](crate::provider::shrink_result)).
    pub(crate) fn shrunk(
        mut self,
        logs: Vec<String>,
        value: Option<JsonValue>,
        message: Option<String>,
        truncated: Truncated,
    ) -> Self {
        self.logs = logs;
        if self.value.is_some() {
            self.value = value;
        }
        if let (Some(error), Some(message)) = (self.error.take(), message) {
            self.error = Some(error.with_message(message));
        }
        self.truncated = Some(truncated);
        self
    }

    /// How much the result was shrunk to fit
    /// [`CodeRunRequest::truncate`](crate::CodeRunRequest::truncate)'s budget; `None` when it
    /// was handed back whole.
    pub fn truncated(&self) -> Option<Truncated> {
        self.truncated
    }

    /// What the run's session carried ([`CodeRunRequest::session`](crate::CodeRunRequest::session));
    /// `None` for a run in no session.
    pub fn session(&self) -> Option<&SessionReport> {
        self.session.as_deref()
    }

    /// The same result, saying what its session carried.
    pub(crate) fn set_session(&mut self, report: SessionReport) {
        self.session = Some(Box::new(report));
    }

    /// What the program printed, in emission order.
    pub fn logs(&self) -> &[String] {
        &self.logs
    }

    /// What the program returned; `None` when it returned nothing or failed.
    pub fn value(&self) -> Option<&JsonValue> {
        self.value.as_ref()
    }

    /// Why the run failed; `None` when it completed.
    pub fn error(&self) -> Option<&CodeRunFailure> {
        self.error.as_ref()
    }

    /// The run paused for a decision on a call (see [`Approvals`](crate::Approvals)): its
    /// checkpoint and the calls waiting; `None` when it completed or failed. A paused run has
    /// neither a value nor an error.
    pub fn paused(&self) -> Option<&Paused> {
        self.paused.as_deref()
    }

    /// Takes the paused run out, leaving `None`.
    pub fn take_paused(&mut self) -> Option<Paused> {
        self.paused.take().map(|paused| *paused)
    }

    /// Whether the run completed without a failure (a paused run did not complete).
    pub fn is_ok(&self) -> bool {
        self.error.is_none() && self.paused.is_none()
    }

    /// Takes the value out, leaving `None`.
    pub fn take_value(&mut self) -> Option<JsonValue> {
        self.value.take()
    }

    /// Splits the result into logs and either the value or the failure. A paused result splits
    /// as `Ok(None)`: take its [`paused`](CodeRunResult::paused) run out first.
    pub fn into_parts(mut self) -> (Vec<String>, Result<Option<JsonValue>, CodeRunFailure>) {
        let logs = std::mem::take(&mut self.logs);
        let outcome = match self.error.take() {
            Some(error) => Err(error),
            None => Ok(self.value.take()),
        };
        (logs, outcome)
    }

    /// The reference JSON form of this result, encoded without recursion (see [`json::encode`]).
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"logs\":[");
        for (index, log) in self.logs.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(&json::quote(log));
        }
        out.push(']');
        if let Some(value) = &self.value {
            out.push_str(",\"value\":");
            json::encode_into(value, &mut out);
        }
        if let Some(error) = &self.error {
            out.push_str(",\"error\":{\"kind\":");
            out.push_str(&json::quote(error.kind.as_str()));
            out.push_str(",\"message\":");
            out.push_str(&json::quote(&error.message));
            out.push('}');
        }
        if let Some(truncated) = &self.truncated {
            out.push_str(&format!(
                ",\"truncated\":{{\"fromBytes\":{},\"toBytes\":{}}}",
                truncated.from_bytes, truncated.to_bytes
            ));
        }
        if let Some(session) = &self.session {
            out.push_str(",\"session\":");
            // A report is names and numbers; serde_json cannot fail on it.
            out.push_str(&serde_json::to_string(session).unwrap_or_else(|_| "null".to_owned()));
        }
        if let Some(paused) = &self.paused {
            out.push_str(",\"paused\":{\"pending\":");
            json::encode_into(&pending_json(&paused.pending), &mut out);
            out.push_str(",\"checkpoint\":");
            out.push_str(&paused.checkpoint.to_json());
            out.push('}');
        }
        out.push('}');
        out
    }
}

impl Serialize for CodeRunResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut fields = serializer.serialize_struct("CodeRunResult", 2)?;
        fields.serialize_field("logs", &self.logs)?;
        if let Some(value) = &self.value {
            fields.serialize_field("value", value)?;
        }
        if let Some(error) = &self.error {
            fields.serialize_field("error", error)?;
        }
        if let Some(paused) = &self.paused {
            fields.serialize_field("paused", paused)?;
        }
        if let Some(truncated) = &self.truncated {
            fields.serialize_field("truncated", truncated)?;
        }
        if let Some(session) = &self.session {
            fields.serialize_field("session", session)?;
        }
        fields.end()
    }
}

/// Why a run failed: a [`FailureKind`] and a human-readable message.
///
/// The message is data for the model that wrote the program; the kind is for the host to branch on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeRunFailure {
    kind: FailureKind,
    message: String,
}

impl CodeRunFailure {
    /// Which of the six kinds this is.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The diagnostic, e.g. the exception's stack or `compute budget exhausted (100ms busy)`.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    pub(crate) fn with_message(self, message: String) -> Self {
        Self { message, ..self }
    }

    /// The program threw; `message` is the rendered exception (stack, message or `String(value)`).
    pub(crate) fn exception(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Exception, message)
    }

    /// The compute budget (CPU time actually used by the program) ran out.
    pub(crate) fn compute_budget_exhausted(compute_ms: u64) -> Self {
        Self::new(FailureKind::Timeout, format!("compute budget exhausted ({compute_ms}ms busy)"))
    }

    /// The wall clock ran out.
    pub(crate) fn wall_clock_reached(max_wall_ms: u64) -> Self {
        Self::new(FailureKind::Timeout, format!("wall-clock ceiling reached ({max_wall_ms}ms)"))
    }

    /// The request's cancellation token fired, before or during the run.
    ///
    /// A `CancellationToken` carries no reason, so the message is always `cancelled`.
    pub(crate) fn cancelled() -> Self {
        Self::new(FailureKind::Abort, "cancelled")
    }

    /// The provider was disposed while the run was in flight.
    pub(crate) fn runtime_disposed() -> Self {
        Self::new(FailureKind::Abort, "runtime disposed")
    }

    /// The substrate exited with `code` before the program settled.
    pub(crate) fn worker_exited(code: impl fmt::Display) -> Self {
        Self::new(
            FailureKind::WorkerExit,
            format!("worker exited with code {code} before completing"),
        )
    }

    /// The substrate failed before the program settled (out of memory, spawn failure, protocol
    /// violation); `detail` says how.
    pub(crate) fn worker_error(detail: impl fmt::Display) -> Self {
        Self::new(FailureKind::WorkerExit, format!("worker error: {detail}"))
    }

    /// The program's completion value was not lossless JSON.
    pub(crate) fn invalid_output() -> Self {
        Self::new(FailureKind::InvalidOutput, "program completion must be lossless JSON")
    }

    /// The program's completion value was a function.
    pub(crate) fn returned_function() -> Self {
        Self::new(FailureKind::InvalidOutput, "the program returned a function; call it")
    }

    /// The logs plus the value or diagnostic did not fit `max_output_bytes` (the full message; the
    /// ledger may return only a prefix of it when the budget is tiny).
    pub(crate) fn output_limit(max_output_bytes: usize) -> Self {
        Self::new(
            FailureKind::OutputLimit,
            format!("outer output exceeded {max_output_bytes} bytes"),
        )
    }

    /// [`Self::output_limit`] without the budget: what a stop for output says of itself before
    /// the ledger, which knows the budget, builds the result.
    pub(crate) fn output_budget_exceeded() -> Self {
        Self::new(FailureKind::OutputLimit, "outer output exceeded the output budget")
    }
}

impl fmt::Display for CodeRunFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// The six ways a run can fail. They are orthogonal: a budget expiry is not an exception, an abort is
/// not a timeout, a substrate death is neither.
///
/// The set is closed by the contract (consumers switch on it), so the enum is exhaustive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The program threw, or failed to parse, type-strip or compile. Serialized `exception`.
    Exception,
    /// The compute budget or the wall-clock ceiling expired. Serialized `timeout`.
    Timeout,
    /// The request was cancelled or the runtime disposed. Serialized `abort`.
    Abort,
    /// The substrate died without settling (out of memory, exit, spawn failure). Serialized
    /// `worker-exit`.
    WorkerExit,
    /// The completion value was not lossless JSON. Serialized `invalid-output`.
    InvalidOutput,
    /// Logs plus value or diagnostic exceeded the output budget. Serialized `output-limit`.
    OutputLimit,
}

impl FailureKind {
    /// Every kind, in declaration order.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::Exception,
        FailureKind::Timeout,
        FailureKind::Abort,
        FailureKind::WorkerExit,
        FailureKind::InvalidOutput,
        FailureKind::OutputLimit,
    ];

    /// The wire spelling: `exception`, `timeout`, `abort`, `worker-exit`, `invalid-output` or
    /// `output-limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Exception => "exception",
            FailureKind::Timeout => "timeout",
            FailureKind::Abort => "abort",
            FailureKind::WorkerExit => "worker-exit",
            FailureKind::InvalidOutput => "invalid-output",
            FailureKind::OutputLimit => "output-limit",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The pending calls as JSON: `[{"id", "namespace", "function", "args"}, …]`, the shape every
/// boundary (the command line, MCP) shows them in.
pub(crate) fn pending_json(pending: &[crate::PendingCall]) -> JsonValue {
    pending
        .iter()
        .map(|call| {
            crate::json!({
                "id": call.id,
                "namespace": call.namespace,
                "function": call.function,
                "args": call.args.clone(),
            })
        })
        .collect()
}

/// The serde shape of [`CodeRunResult`]; conversion from it enforces the invariants.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResult {
    logs: Vec<String>,
    #[serde(default, deserialize_with = "present")]
    value: Option<JsonValue>,
    #[serde(default)]
    error: Option<CodeRunFailure>,
    #[serde(default)]
    paused: Option<Paused>,
    #[serde(default)]
    truncated: Option<Truncated>,
    #[serde(default)]
    session: Option<SessionReport>,
}

/// Deserializes a present `value` key as `Some`, even when it holds `null` (a returned `null` is a
/// value, unlike an absent key).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<JsonValue>, D::Error> {
    JsonValue::deserialize(deserializer).map(Some)
}

impl TryFrom<RawResult> for CodeRunResult {
    type Error = String;

    fn try_from(raw: RawResult) -> Result<Self, String> {
        let mut result = match (raw.value, raw.error, raw.paused) {
            (Some(_), Some(_), _) => {
                return Err("a run result carries both `value` and `error`".to_owned());
            }
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                return Err("a paused run result carries a `value` or an `error`".to_owned());
            }
            (None, None, Some(paused)) => Self::paused_with(raw.logs, paused),
            (value, None, None) => Self::completed(raw.logs, value),
            (None, Some(error), None) => Self::failed(raw.logs, error),
        };
        result.truncated = raw.truncated;
        result.session = raw.session.map(Box::new);
        Ok(result)
    }
}

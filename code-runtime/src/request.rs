//! [`CodeRunRequest`]: one program, its bindings, a cancellation token, per-request limits, and
//! the [`Approvals`] that decide its marked calls (or the paused run it [`Resume`]s).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use crate::approval::{Approver, DEFAULT_APPROVAL_TIMEOUT};
use crate::binding::CodeBindingNamespace;
use crate::checkpoint::{Checkpoint, CheckpointKey, Decisions, SpentCheckpoints};
use crate::event::EventSink;
use crate::json::JsonValue;
use crate::limits::RunLimits;
use crate::session::{SessionId, Sessions};

/// One program to run, the bindings it may call, a token that aborts it, and limits that may
/// tighten the provider's for this run.
///
/// ```
/// use code_runtime::{CodeRunRequest, RunLimits};
///
/// let request = CodeRunRequest::new("return 1")
///     .limits(RunLimits { max_wall_ms: Some(5_000), ..RunLimits::default() });
/// # assert_eq!(request.limits.max_wall_ms, Some(5_000));
/// ```
#[derive(Clone, Debug, Default)]
pub struct CodeRunRequest {
    /// The program, in the provider's language, executed as the body of an async function:
    /// top-level `await` and `return` work, and the returned value is the completion.
    pub program: String,
    /// The namespaces the program sees, each as one object named by its `global`.
    pub bindings: Vec<CodeBindingNamespace>,
    /// Inputs the program reads as globals (`accountId`, `spec`), in order: each a lossless JSON
    /// value, frozen (a program that assigns into one gets a `TypeError`), under a name checked
    /// as a namespace's `global` is.
    pub values: IndexMap<String, JsonValue>,
    /// Whether the program also sees `call_tool(name, args)`, which calls a function by its
    /// name: `"namespace.function"`, or the bare function name when only one namespace has it
    /// (the convention of FastMCP's code mode). An unknown name is a `TypeError` that lists the
    /// names there are.
    pub call_tool: bool,
    /// Cancelling this token stops the program promptly, even mid-loop, and the run resolves as
    /// `abort` (`cancelled`). Binding calls in flight are cancelled with it (see
    /// [`BindingFunction`](crate::BindingFunction)).
    pub signal: Option<CancellationToken>,
    /// Budgets for this run only. Each one set must be at most the provider's (see
    /// [`CodeRuntime::limits`](crate::CodeRuntime::limits)); unset ones are the provider's.
    pub limits: RunLimits,
    /// Where the run's live events go ([`RunEvent`](crate::RunEvent)), if anywhere.
    pub events: Option<EventSink>,
    /// Who decides the calls that need approval
    /// ([`BindingFunction::approval`](crate::BindingFunction::approval)), and whether the run
    /// may pause; without them, such calls are denied.
    pub approvals: Option<Approvals>,
    /// The paused run this request continues ([`CodeRunRequest::resuming`]).
    pub resume: Option<Resume>,
    /// Shrink the result to this many bytes of output (counted as the output budget counts:
    /// the logs as a JSON array plus the value, or the failure's message) instead of handing
    /// back more ([`CodeRunRequest::truncate`]).
    pub truncate: Option<usize>,
    /// The session the run belongs to ([`CodeRunRequest::session`]).
    pub session: Option<SessionId>,
    /// Where its session is kept, when not in the runtime's own memory
    /// ([`CodeRunRequest::sessions`]).
    pub sessions: Option<Sessions>,
}

/// What a resumed request continues: a checkpoint, and the decisions on its pending calls.
#[derive(Clone, Debug)]
pub struct Resume {
    /// The paused run.
    pub checkpoint: Checkpoint,
    /// The decisions on its pending calls.
    pub decisions: Decisions,
}

impl CodeRunRequest {
    /// A request for `program` with no bindings, no signal and the provider's limits.
    pub fn new(program: impl Into<String>) -> Self {
        Self { program: program.into(), ..Self::default() }
    }

    /// Adds a namespace (checked when the run starts; [`Bindings`](crate::Bindings) checks them
    /// once, ahead).
    pub fn binding(mut self, namespace: CodeBindingNamespace) -> Self {
        self.bindings.push(namespace);
        self
    }

    /// A request that continues the paused run of `checkpoint` with `decisions` on its pending
    /// calls: the checkpoint's program runs again from its start, its recorded calls are
    /// answered from the checkpoint without calling the host, the decisions apply to the pending
    /// calls, and the run goes on live. Give it the bindings (the same ones: the checkpoint
    /// holds their fingerprint), its values, and the [`Approvals`] whose key signed the
    /// checkpoint, as for the run that paused. A program that takes another path (a call other
    /// than the recorded one) ends as `exception` naming the call.
    pub fn resuming(checkpoint: Checkpoint, decisions: Decisions) -> Self {
        Self { resume: Some(Resume { checkpoint, decisions }), ..Self::default() }
    }

    /// Sets who decides the calls that need approval.
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = Some(approvals);
        self
    }

    /// Adds (or replaces) the value the program reads as the global `name`.
    pub fn value(mut self, name: impl Into<String>, value: JsonValue) -> Self {
        self.values.insert(name.into(), value);
        self
    }

    /// Gives the program `call_tool(name, args)` ([`call_tool`](CodeRunRequest::call_tool)).
    pub fn call_tool(mut self) -> Self {
        self.call_tool = true;
        self
    }

    /// Shrinks a result over `max_bytes` of output to fit it ([`json::shrink`](crate::json::shrink):
    /// the largest strings and arrays cut first, same shape, explicit markers), and says so
    /// ([`CodeRunResult::truncated`](crate::CodeRunResult::truncated)). For what a model reads,
    /// `4 * tokens` is a fair byte budget.
    ///
    /// The output budget ([`Limits::max_output_bytes`](crate::Limits::max_output_bytes)) still
    /// stops a run that outgrows it. A host that wants results shrunk rather than failed sets
    /// that budget high (up to the memory budget, which bounds what the host holds for the run
    /// anyway) and `max_bytes` to what it wants back, as `code-runtime run --truncate` does.
    pub fn truncate(mut self, max_bytes: usize) -> Self {
        self.truncate = Some(max_bytes);
        self
    }

    /// Runs the program in session `id`: it starts in a fresh cell as any run does, with the
    /// definitions and values the session's previous run left restored before it, and what it
    /// leaves carries to the next ([`CodeRunResult::session`](crate::CodeRunResult::session)
    /// says what carried and what did not). One run at a time per session: a second waits for
    /// its turn, within its own wall clock. Sessions are kept in the runtime's memory unless
    /// [`sessions`](Self::sessions) names a store.
    pub fn session(mut self, id: SessionId) -> Self {
        self.session = Some(id);
        self
    }

    /// Keeps the run's session in `sessions` (a [`DirectorySessionStore`](crate::DirectorySessionStore)
    /// replicas share, say).
    pub fn sessions(mut self, sessions: Sessions) -> Self {
        self.sessions = Some(sessions);
        self
    }

    /// Sets the cancellation token.
    pub fn signal(mut self, signal: CancellationToken) -> Self {
        self.signal = Some(signal);
        self
    }

    /// Sets the per-request limits.
    pub fn limits(mut self, limits: RunLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sends the run's live events to `sink`.
    pub fn events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }

    /// Completes when the request's token is cancelled; never, without a token.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: nothing is lost by dropping it and asking again.
    pub async fn cancelled(&self) {
        match &self.signal {
            Some(signal) => signal.cancelled().await,
            None => std::future::pending().await,
        }
    }

    /// Whether the request's token has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.signal.as_ref().is_some_and(CancellationToken::is_cancelled)
    }
}

/// A request's approvals: who decides, how long a decision may take, and the key a paused run's
/// checkpoint is signed with (and a resumed one checked against).
///
/// Without `Approvals`, a call that needs approval is denied (`no approver`). Without a key, a
/// run cannot pause: a [`Decision::Pause`](crate::Decision::Pause) denies (`this run cannot pause`).
#[derive(Clone)]
pub struct Approvals {
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) key: Option<CheckpointKey>,
    pub(crate) timeout: Duration,
    /// The checkpoints resumed already, each resumed once.
    pub(crate) spent: Arc<dyn SpentCheckpoints>,
}

impl Approvals {
    /// Approvals decided by `approver`, within [`DEFAULT_APPROVAL_TIMEOUT`], that cannot pause.
    pub fn new(approver: impl Approver + 'static) -> Self {
        Self::shared(Arc::new(approver))
    }

    /// The same, with an approver the host shares between requests.
    pub fn shared(approver: Arc<dyn Approver>) -> Self {
        Self {
            approver,
            key: None,
            timeout: DEFAULT_APPROVAL_TIMEOUT,
            spent: crate::checkpoint::spent_in_process(),
        }
    }

    /// Lets the run pause: its checkpoint is signed with `key`, and a checkpoint it resumes must
    /// be signed with it. In a run that may pause, randomness and clocks come from the run's seed
    /// and recorded readings, so a resumed program sees the same numbers again.
    #[must_use]
    pub fn checkpoint_key(mut self, key: CheckpointKey) -> Self {
        self.key = Some(key);
        self
    }

    /// Where resumed checkpoints are remembered, so each is resumed once: by default this
    /// process's memory ([`spent_in_process`](crate::spent_in_process)). Hosts whose
    /// checkpoints may be resumed in another process (replicas sharing the key, a command run
    /// again) give a store they share.
    #[must_use]
    pub fn spent_checkpoints(mut self, spent: Arc<dyn SpentCheckpoints>) -> Self {
        self.spent = spent;
        self
    }

    /// How long one decision may take; then the call is denied (`no decision`).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether a run under these approvals may pause (it has a key).
    pub fn can_pause(&self) -> bool {
        self.key.is_some()
    }
}

impl fmt::Debug for Approvals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approvals")
            .field("approver", &self.approver.name())
            .field("can_pause", &self.can_pause())
            .field("timeout", &self.timeout)
            .finish()
    }
}

//! [`CodeRunRequest`]: one program, its bindings, a cancellation token, and per-request limits.

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use crate::binding::CodeBindingNamespace;
use crate::event::EventSink;
use crate::json::JsonValue;

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
}

/// Per-request budgets: each `Some` tightens the provider's [`Limits`](crate::Limits) for one run.
///
/// A request can only tighten: a value above the provider's, or zero, makes `run` fail with a
/// [`ContractError`](crate::ContractError) that names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// CPU time, in milliseconds ([`Limits::compute_ms`](crate::Limits::compute_ms)).
    pub compute_ms: Option<u64>,
    /// The wall clock, in milliseconds ([`Limits::max_wall_ms`](crate::Limits::max_wall_ms)).
    pub max_wall_ms: Option<u64>,
    /// The output budget, in bytes
    /// ([`Limits::max_output_bytes`](crate::Limits::max_output_bytes)).
    pub max_output_bytes: Option<u64>,
    /// The memory budget, in MiB ([`Limits::max_memory_mb`](crate::Limits::max_memory_mb)).
    pub max_memory_mb: Option<u64>,
    /// Binding calls in all ([`Limits::max_calls`](crate::Limits::max_calls)).
    pub max_calls: Option<u64>,
    /// Calls to any one function
    /// ([`Limits::max_calls_per_function`](crate::Limits::max_calls_per_function)).
    pub max_calls_per_function: Option<u64>,
    /// Calls in flight at once ([`Limits::max_pending_calls`](crate::Limits::max_pending_calls)).
    pub max_pending_calls: Option<u64>,
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

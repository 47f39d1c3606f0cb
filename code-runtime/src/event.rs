//! Live events: what a run does, delivered while it does it ([`RunEvent`], [`EventSink`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::approval::{ApprovalRequest, Decision};
use crate::json::JsonValue;
use crate::result::FailureKind;

/// One thing a run did, borrowed from the host loop for the length of one sink call.
///
/// A run delivers, in the order they happened: each [`Log`](RunEvent::Log) line the output ledger
/// admitted, each [`Call`](RunEvent::Call) the program made (budget rejections included: they are
/// calls the program made, answered without a host closure), each [`Settled`](RunEvent::Settled)
/// answer (with [`ApprovalRequested`](RunEvent::ApprovalRequested) and
/// [`ApprovalDecided`](RunEvent::ApprovalDecided) between a call and its answer when it needs
/// approval), and exactly one [`End`](RunEvent::End) once the result is built, whatever ended the run
/// (a budget, a crash, cancellation, a dispose). A run whose `run` future is dropped ends its
/// stream with `End { kind: Some(Abort) }` as it tears down.
///
/// The events change nothing about the result: the ledger builds it as it would without a sink.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum RunEvent<'a> {
    /// A line the program printed, as the result's `logs` hold it.
    Log {
        /// The line.
        line: &'a str,
    },
    /// The program called a binding.
    Call {
        /// The call's id, unique within the run; its [`Settled`](RunEvent::Settled) carries it.
        id: u64,
        /// The namespace's `global`.
        namespace: &'a str,
        /// The function's name.
        function: &'a str,
        /// The argument (JSON `null` when the program passed none).
        args: &'a JsonValue,
    },
    /// A call was answered. Calls still in flight when the run ends are cancelled and get none.
    Settled {
        /// The call's id.
        id: u64,
        /// `None` when it resolved; the rejection's message when it rejected.
        error: Option<&'a str>,
        /// From the call to its answer.
        duration: Duration,
    },
    /// A call needs the host's approval
    /// ([`BindingFunction::approval`](crate::BindingFunction::approval)) and waits for it; its
    /// [`Call`](RunEvent::Call) came just before.
    ApprovalRequested {
        /// The call's id.
        id: u64,
        /// What the approver is asked.
        request: &'a ApprovalRequest,
    },
    /// The decision on a call that needed approval.
    ApprovalDecided {
        /// The call's id.
        id: u64,
        /// The decision.
        decision: &'a Decision,
        /// Who made it: the approver's [`name`](crate::Approver::name), `"resume"` for a
        /// decision a resume brought, `"timeout"` when none came in time, `"none"` without an
        /// approver.
        by: &'a str,
    },
    /// The run's result is built: its failure kind, `None` when it succeeded or paused (see
    /// [`CodeRunResult::paused`](crate::CodeRunResult::paused)). Always last.
    End {
        /// The result's failure kind.
        kind: Option<FailureKind>,
    },
}

/// Where a run's [`RunEvent`]s go: a function the host loop calls for each, in order, on the
/// thread that polls the run.
///
/// It runs inside the host loop, so it should return quickly (write a line, send on a channel);
/// a sink that blocks holds the run up, its budgets still running.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use code_runtime::{CodeRunRequest, EventSink, RunEvent};
///
/// let lines = Arc::new(Mutex::new(Vec::new()));
/// let seen = lines.clone();
/// let sink = EventSink::new(move |event| {
///     if let RunEvent::Log { line } = event {
///         seen.lock().unwrap().push(line.to_owned());
///     }
/// });
/// let request = CodeRunRequest::new("console.log('hi')").events(sink);
/// # assert!(request.events.is_some());
/// ```
#[derive(Clone)]
pub struct EventSink(Arc<dyn Fn(RunEvent<'_>) + Send + Sync>);

impl EventSink {
    /// A sink that calls `deliver` for each event.
    pub fn new(deliver: impl Fn(RunEvent<'_>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(deliver))
    }

    /// Delivers one event.
    pub fn deliver(&self, event: RunEvent<'_>) {
        (self.0)(event);
    }
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventSink(..)")
    }
}

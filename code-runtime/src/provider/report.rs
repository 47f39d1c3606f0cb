//! [`RunReport`]: what a run tells the world outside its result while it runs: its `tracing`
//! span and the request's [`EventSink`].

use std::time::Duration;

use tokio::time::Instant;

use crate::approval::{ApprovalRequest, Decision};
use crate::binding::BindingError;
use crate::event::{EventSink, RunEvent};
use crate::json::{self, JsonValue};
use crate::provider::CallId;
use crate::provider::approvals::Decider;
use crate::result::{CodeRunResult, FailureKind};

/// One run's span and event sink. Every run ends its report exactly once: with its result
/// ([`finish`](RunReport::finish)), or, when the `run` future is dropped first, as an abort.
pub(crate) struct RunReport {
    span: tracing::Span,
    events: Option<EventSink>,
    started: Instant,
    compute: Duration,
    calls: u64,
    finished: bool,
}

impl RunReport {
    /// The report of a run that started at `started`, its span a child of the current one.
    pub(crate) fn new(
        language: &'static str,
        isolation: &'static str,
        events: Option<EventSink>,
        started: Instant,
    ) -> Self {
        let span = tracing::info_span!(
            "code_runtime.run",
            language,
            isolation,
            kind = tracing::field::Empty,
            wall_ms = tracing::field::Empty,
            compute_ms = tracing::field::Empty,
            calls = tracing::field::Empty,
            approvals = tracing::field::Empty,
            paused = tracing::field::Empty,
            output_bytes = tracing::field::Empty,
        );
        Self { span, events, started, compute: Duration::ZERO, calls: 0, finished: false }
    }

    /// The run's span: the host loop runs in it, and each call's span is its child.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// A line the ledger admitted.
    pub(crate) fn log(&self, line: &str) {
        if let Some(events) = &self.events {
            events.deliver(RunEvent::Log { line });
        }
    }

    /// A call the program made.
    pub(crate) fn call(&self, id: CallId, (namespace, function): (&str, &str), args: &JsonValue) {
        if let Some(events) = &self.events {
            events.deliver(RunEvent::Call { id, namespace, function, args });
        }
    }

    /// A call's answer.
    pub(crate) fn settled(
        &self,
        id: CallId,
        outcome: &Result<JsonValue, BindingError>,
        duration: Duration,
    ) {
        if let Some(events) = &self.events {
            let error = outcome.as_ref().err().map(BindingError::message);
            events.deliver(RunEvent::Settled { id, error, duration });
        }
    }

    /// A call waits for approval.
    pub(crate) fn approval_requested(&self, id: CallId, request: &ApprovalRequest) {
        tracing::info!(
            parent: &self.span,
            call = request.call,
            namespace = %request.namespace,
            function = %request.function,
            "approval requested"
        );
        if let Some(events) = &self.events {
            events.deliver(RunEvent::ApprovalRequested { id, request });
        }
    }

    /// The decision on a call that waited for approval, and who made it: the audit trail.
    pub(crate) fn decided(&self, id: CallId, decision: &Decision, by: &Decider) {
        let by = by.as_str();
        let reason = match decision {
            Decision::Deny(reason) => reason.as_str(),
            Decision::Allow | Decision::Pause => "",
        };
        tracing::info!(
            parent: &self.span,
            call_id = id,
            decision = decision.as_str(),
            reason,
            by,
            "approval decided"
        );
        if let Some(events) = &self.events {
            events.deliver(RunEvent::ApprovalDecided { id, decision, by });
        }
    }

    /// How many calls were asked about.
    pub(crate) fn approvals(&self, asked: u64) {
        if asked > 0 {
            self.span.record("approvals", asked);
        }
    }

    /// What the host loop measured before the substrate went away.
    pub(crate) fn measured(&mut self, compute: Duration, calls: u64) {
        self.compute = compute;
        self.calls = calls;
    }

    /// Records the result on the span and ends the event stream.
    pub(crate) fn finish(&mut self, result: &CodeRunResult) {
        let kind = result.error().map(|failure| failure.kind());
        if result.paused().is_some() {
            self.span.record("paused", true);
        }
        if !self.span.is_disabled() {
            self.span.record("output_bytes", output_bytes(result));
        }
        self.end(kind);
    }

    fn end(&mut self, kind: Option<FailureKind>) {
        self.finished = true;
        let span = &self.span;
        span.record("kind", kind.map_or("ok", FailureKind::as_str));
        span.record("wall_ms", self.started.elapsed().as_secs_f64() * 1e3);
        span.record("compute_ms", self.compute.as_secs_f64() * 1e3);
        span.record("calls", self.calls);
        if let Some(events) = &self.events {
            events.deliver(RunEvent::End { kind });
        }
    }
}

impl Drop for RunReport {
    fn drop(&mut self) {
        if !self.finished {
            // The `run` future was dropped: the run is being torn down as cancelled.
            self.end(Some(FailureKind::Abort));
        }
    }
}

/// The bytes the result charged to the output budget, as the ledger counts them: the log array
/// and the value or the failure's message, each as JSON.
fn output_bytes(result: &CodeRunResult) -> usize {
    let lines = result.logs();
    let separators = lines.len().saturating_sub(1);
    let logs: usize = lines.iter().map(|line| json::string_len(line)).sum::<usize>() + separators;
    let tail = match (result.value(), result.error()) {
        (Some(value), _) => json::encoded_len(value, usize::MAX).unwrap_or(0),
        (None, Some(failure)) => json::string_len(failure.message()),
        (None, None) => 0,
    };
    2 + logs + tail
}

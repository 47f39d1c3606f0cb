//! What `code-runtime mcp` counts, for `GET /metrics` (Prometheus text): runs by language and
//! outcome, their durations, runs in flight and queued, binding calls by namespace and outcome,
//! approval decisions, and the sandbox cells alive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use code_runtime::{CodeRunResult, RunEvent};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// The server's counters. Cheap to update from any task (atomics behind the `prometheus` types).
pub(crate) struct Metrics {
    registry: Registry,
    runs: IntCounterVec,
    durations: HistogramVec,
    in_flight: IntGauge,
    queued: IntGauge,
    calls: IntCounterVec,
    approvals: IntCounterVec,
    cells: IntGauge,
}

/// A run's duration buckets, in seconds: from a warm trivial run (a few ms) to the longest wall
/// clock a config allows by default (minutes).
const DURATION_BUCKETS: [f64; 12] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 120.0];

impl Metrics {
    pub(crate) fn new() -> Arc<Self> {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let counter = IntCounterVec::new(Opts::new(name, help), labels)
                .expect("a valid metric name and labels");
            registry.register(Box::new(counter.clone())).expect("registered once");
            counter
        };
        let gauge = |name: &str, help: &str| {
            let gauge = IntGauge::new(name, help).expect("a valid metric name");
            registry.register(Box::new(gauge.clone())).expect("registered once");
            gauge
        };
        let runs = counter(
            "code_runtime_runs_total",
            "Runs ended, by language and outcome (ok, paused, refused, or the failure kind).",
            &["language", "outcome"],
        );
        let calls = counter(
            "code_runtime_calls_total",
            "Binding calls answered, by namespace and outcome (ok or error).",
            &["namespace", "outcome"],
        );
        let approvals = counter(
            "code_runtime_approvals_total",
            "Decisions on calls that needed approval (allow, deny, pause).",
            &["decision"],
        );
        let durations = HistogramVec::new(
            HistogramOpts::new(
                "code_runtime_run_duration_seconds",
                "How long runs took, queueing excluded.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &["language"],
        )
        .expect("a valid histogram");
        registry.register(Box::new(durations.clone())).expect("registered once");
        let in_flight = gauge("code_runtime_runs_in_flight", "Runs running now.");
        let queued =
            gauge("code_runtime_runs_queued", "Runs waiting for a slot (--max-concurrent-runs).");
        let cells = gauge(
            "code_runtime_cells_alive",
            "Sandbox cells of this process not yet reaped (running runs, and spares started ahead).",
        );
        Arc::new(Self { registry, runs, durations, in_flight, queued, calls, approvals, cells })
    }

    /// A run waits for a slot until the guard is dropped.
    pub(crate) fn queued(self: &Arc<Self>) -> Gauged {
        Gauged::new(&self.queued)
    }

    /// A run runs until the guard is dropped.
    pub(crate) fn in_flight(self: &Arc<Self>) -> Gauged {
        Gauged::new(&self.in_flight)
    }

    /// A run on `language` ended after `took` with `result` (`None`: refused, a contract error).
    pub(crate) fn run_ended(&self, language: &str, result: Option<&CodeRunResult>, took: Duration) {
        let outcome = match result {
            None => "refused",
            Some(result) if result.paused().is_some() => "paused",
            Some(result) => result.error().map_or("ok", |error| error.kind().as_str()),
        };
        self.runs.with_label_values(&[language, outcome]).inc();
        self.durations.with_label_values(&[language]).observe(took.as_secs_f64());
    }

    /// An event sink's part for one run: counts its calls' answers (by the namespace their
    /// `Call` named) and its approval decisions.
    pub(crate) fn observer(self: &Arc<Self>) -> impl Fn(&RunEvent<'_>) + Send + Sync + 'static {
        let metrics = self.clone();
        // The namespace of each call in flight, by id: a `Settled` names only the id.
        let pending: Mutex<HashMap<u64, String>> = Mutex::new(HashMap::new());
        move |event| match event {
            RunEvent::Call { id, namespace, .. } => {
                pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(*id, (*namespace).to_owned());
            }
            RunEvent::Settled { id, error, .. } => {
                let namespace = pending.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
                if let Some(namespace) = namespace {
                    let outcome = if error.is_some() { "error" } else { "ok" };
                    metrics.calls.with_label_values(&[namespace.as_str(), outcome]).inc();
                }
            }
            RunEvent::ApprovalDecided { decision, .. } => {
                metrics.approvals.with_label_values(&[decision.as_str()]).inc();
            }
            _ => {}
        }
    }

    /// The Prometheus text exposition of every metric.
    pub(crate) fn render(&self) -> String {
        self.cells.set(i64::try_from(code_runtime_sandbox::cells_alive()).unwrap_or(i64::MAX));
        let mut text = Vec::new();
        // Encoding into a Vec cannot fail but for a metric family the registry would not hold.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut text);
        String::from_utf8_lossy(&text).into_owned()
    }
}

/// One unit of a gauge, held until dropped (so a cancelled run gives its unit back too).
pub(crate) struct Gauged(IntGauge);

impl Gauged {
    fn new(gauge: &IntGauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Gauged {
    fn drop(&mut self) {
        self.0.dec();
    }
}

//! What the host controls and sees of a run beside its result: call budgets, live events and
//! `tracing` spans, through the scripted substrate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use code_runtime::json;
use code_runtime::provider::{Ending, Event, FunctionId};
use code_runtime::{
    BindingArgs, BindingError, CodeBindingNamespace, CodeRunRequest, CodeRuntime, EventSink,
    FailureKind, JsonValue, Limits, RunEvent, RunLimits, binding,
};
use tracing::span;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::fake::{FakeProvider, Script};

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn call(id: u64, function: u32) -> Event {
    Event::Call {
        id,
        function: FunctionId::new(function),
        args: BindingArgs::new(json!({ "n": id })),
    }
}

/// `tools.a` and `tools.b`, echoing; `tools.hang` never settles. Counts closure calls.
fn tools(ran: Arc<AtomicUsize>) -> CodeBindingNamespace {
    let counted = |ran: Arc<AtomicUsize>| {
        binding(move |args| {
            ran.fetch_add(1, Ordering::SeqCst);
            async move { Ok(args.into_value()) }
        })
    };
    let hanging = {
        let ran = ran.clone();
        binding(move |_| {
            ran.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<JsonValue, BindingError>>()
        })
    };
    CodeBindingNamespace::new("tools")
        .function("a", counted(ran.clone()))
        .function("b", counted(ran))
        .function("hang", hanging)
        .error_class("ToolCallError", "toolName")
}

/// Starts `request` on a fake provider and hands back its script and the run.
async fn start(
    limits: Limits,
    request: CodeRunRequest,
) -> (Script, tokio::task::JoinHandle<code_runtime::CodeRunResult>) {
    let (runtime, mut scripts) = FakeProvider::new("typescript", limits, 8);
    let run = tokio::spawn(async move { runtime.run(request).await.unwrap() });
    (scripts.recv().await.unwrap(), run)
}

async fn answer(script: &mut Script, id: u64, function: u32) -> Result<JsonValue, BindingError> {
    script.events.send(call(id, function)).unwrap();
    let (answered, outcome) = script.settled.recv().await.unwrap();
    assert_eq!(answered, id);
    outcome
}

#[track_caller]
fn refused(outcome: Result<JsonValue, BindingError>, message: &str, budget: &str, limit: u64) {
    let error = outcome.expect_err("over budget");
    assert_eq!(error.message(), message);
    assert_eq!(error.data(), Some(&json!({ "budget": budget, "limit": limit })));
}

#[test]
fn a_call_over_the_total_budget_rejects_and_no_closure_runs() {
    tokio().block_on(async {
        let ran = Arc::new(AtomicUsize::new(0));
        let limits = Limits { max_calls: 2, ..Limits::default() };
        let (mut script, run) =
            start(limits, CodeRunRequest::new("p").binding(tools(ran.clone()))).await;
        assert!(answer(&mut script, 1, 0).await.is_ok());
        assert!(answer(&mut script, 2, 1).await.is_ok());
        refused(
            answer(&mut script, 3, 0).await,
            r#"binding "tools.a" was not called: this run may make at most 2 binding calls"#,
            "maxCalls",
            2,
        );
        assert_eq!(ran.load(Ordering::SeqCst), 2, "the host never saw the third call");
        script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        assert!(run.await.unwrap().is_ok(), "a refused call does not fail the run");
    });
}

#[test]
fn each_function_has_its_own_budget_and_a_request_may_tighten_it() {
    tokio().block_on(async {
        let ran = Arc::new(AtomicUsize::new(0));
        let request = CodeRunRequest::new("p")
            .binding(tools(ran.clone()))
            .limits(RunLimits { max_calls_per_function: Some(1), ..RunLimits::default() });
        let (mut script, run) = start(Limits::default(), request).await;
        assert!(answer(&mut script, 1, 0).await.is_ok());
        refused(
            answer(&mut script, 2, 0).await,
            r#"binding "tools.a" was not called: this run may call it at most once"#,
            "maxCallsPerFunction",
            1,
        );
        assert!(answer(&mut script, 3, 1).await.is_ok(), "tools.b has its own budget");
        assert_eq!(ran.load(Ordering::SeqCst), 2);
        script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        run.await.unwrap();
    });
}

#[test]
fn calls_past_the_pending_budget_wait_their_turn_in_call_order() {
    tokio().block_on(async {
        let ran = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let gated = {
            let (ran, gate) = (ran.clone(), gate.clone());
            binding(move |args| {
                let (ran, gate) = (ran.clone(), gate.clone());
                ran.fetch_add(1, Ordering::SeqCst);
                async move {
                    gate.acquire().await.expect("open").forget();
                    Ok(args.into_value())
                }
            })
        };
        let limits = Limits { max_pending_calls: 2, ..Limits::default() };
        let request = CodeRunRequest::new("p")
            .binding(CodeBindingNamespace::new("tools").function("gated", gated));
        let (mut script, run) = start(limits, request).await;
        for id in 1..=5 {
            script.events.send(call(id, 0)).unwrap();
        }
        // Give the host loop every chance to (wrongly) start more than two.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(ran.load(Ordering::SeqCst), 2, "two in flight, three waiting");
        let mut answered = Vec::new();
        for _ in 1..=5 {
            gate.add_permits(1);
            let (id, outcome) = script.settled.recv().await.unwrap();
            assert_eq!(outcome, Ok(json!({ "n": id })), "a waiting call is not refused");
            answered.push(id);
            assert!(ran.load(Ordering::SeqCst) <= 2 + answered.len());
        }
        answered.sort_unstable();
        assert_eq!(answered, [1, 2, 3, 4, 5]);
        assert_eq!(ran.load(Ordering::SeqCst), 5);
        script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        run.await.unwrap();
    });
}

/// A sink that keeps each event as its `--events`-like text.
fn recording() -> (EventSink, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let sink = EventSink::new(move |event| {
        let text = match event {
            RunEvent::Log { line } => format!("log {line}"),
            RunEvent::Call { id, namespace, function, args } => {
                format!("call {id} {namespace}.{function} {args}")
            }
            RunEvent::Settled { id, error: None, .. } => format!("settled {id} ok"),
            RunEvent::Settled { id, error: Some(message), .. } => {
                format!("settled {id} error {message}")
            }
            RunEvent::End { kind } => format!("end {}", kind.map_or("ok", FailureKind::as_str)),
            _ => "unknown".to_owned(),
        };
        kept.lock().unwrap().push(text);
    });
    (sink, seen)
}

#[test]
fn events_arrive_in_the_order_things_happened_and_end_once() {
    tokio().block_on(async {
        let (sink, seen) = recording();
        let limits = Limits { max_calls: 2, ..Limits::default() };
        let request = CodeRunRequest::new("p").binding(tools(Arc::default())).events(sink);
        let (mut script, run) = start(limits, request).await;
        script.events.send(Event::Log("first".into())).unwrap();
        assert!(answer(&mut script, 1, 0).await.is_ok());
        script.events.send(Event::Log("second".into())).unwrap();
        script.events.send(call(2, 2)).unwrap();
        assert!(answer(&mut script, 3, 1).await.is_err(), "over the budget");
        script.state.late_logs.lock().unwrap().push("late".into());
        script.events.send(Event::Ended(Ending::Completed(Some(json!(7))))).unwrap();
        let result = run.await.unwrap();
        assert_eq!(result.logs(), ["first", "second", "late"]);
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "log first",
                r#"call 1 tools.a {"n":1}"#,
                "settled 1 ok",
                "log second",
                r#"call 2 tools.hang {"n":2}"#,
                r#"call 3 tools.b {"n":3}"#,
                r#"settled 3 error binding "tools.b" was not called: this run may make at most 2 binding calls"#,
                "log late",
                "end ok",
            ],
            "the hanging call was cancelled and never settled"
        );
    });
}

#[test]
fn a_stopped_run_and_a_dropped_run_still_end_their_streams() {
    tokio().block_on(async {
        let (sink, seen) = recording();
        let limits = Limits { max_wall_ms: 50, ..Limits::default() };
        let (script, run) = start(limits, CodeRunRequest::new("p").events(sink)).await;
        assert_eq!(run.await.unwrap().error().map(|e| e.kind()), Some(FailureKind::Timeout));
        assert_eq!(*seen.lock().unwrap(), ["end timeout"]);
        drop(script);

        let (sink, seen) = recording();
        let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 8);
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p").events(sink)).await }
        });
        let script = scripts.recv().await.unwrap();
        script.events.send(Event::Log("one".into())).unwrap();
        while seen.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        run.abort();
        let _ = run.await;
        assert_eq!(*seen.lock().unwrap(), ["log one", "end abort"]);
        runtime.dispose().await;
    });
}

/// A span as the test layer saw it: its name, its fields, its parent's name, and the `agent.turn`
/// span (by its `turn` field) it descends from.
#[derive(Clone, Debug, Default)]
struct SeenSpan {
    name: &'static str,
    fields: HashMap<&'static str, String>,
    parent: Option<&'static str>,
    turn: Option<String>,
}

/// Every span the test subscriber saw, by the id it had while open.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<HashMap<u64, SeenSpan>>>);

struct Fields<'a>(&'a mut HashMap<&'static str, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name(), value.to_owned());
    }
}

impl<S> tracing_subscriber::Layer<S> for Spans
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, cx: Context<'_, S>) {
        let mut seen = SeenSpan { name: attrs.metadata().name(), ..SeenSpan::default() };
        attrs.record(&mut Fields(&mut seen.fields));
        let parent = cx.span(id).and_then(|span| span.parent());
        seen.parent = parent.as_ref().map(|parent| parent.name());
        let mut spans = self.0.lock().unwrap();
        seen.turn = match seen.fields.get("turn") {
            Some(turn) => Some(turn.clone()),
            None => parent.and_then(|parent| spans.get(&parent.id().into_u64())?.turn.clone()),
        };
        // Span ids are reused once closed: the key is the id and the turn together.
        let key = id.into_u64();
        if let Some(old) = spans.insert(key, seen) {
            FINISHED.lock().unwrap().push(old);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, _cx: Context<'_, S>) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
}

/// Spans whose id a later span took.
static FINISHED: Mutex<Vec<SeenSpan>> = Mutex::new(Vec::new());

/// The one subscriber every span test scopes, alive for the whole test binary.
///
/// `tracing` caches each callsite's interest over the dispatchers alive when it is computed, and
/// recomputes it when a dispatcher is made but not when one goes: tests that each made and
/// dropped a subscriber of their own, in parallel, could leave a callsite cached as "never" for
/// the next one (tracing-core's cache, not the host). One subscriber that never goes keeps every
/// callsite's interest right; each test finds its own spans by the `turn` of its `agent.turn`.
///
/// A second dispatcher lives beside it. With exactly one dispatcher alive and no global default,
/// tracing-core computes a callsite's interest from the default of the thread that first hits
/// it, so a callsite first hit where the test's scope is not (a test without a subscriber, a
/// thread the run never reached) would be cached as "never" for every later test; with two, it
/// asks them all.
fn subscriber() -> &'static (tracing::Dispatch, Spans) {
    static SUBSCRIBER: std::sync::OnceLock<(tracing::Dispatch, Spans)> = std::sync::OnceLock::new();
    static BESIDE: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    SUBSCRIBER.get_or_init(|| {
        BESIDE.get_or_init(|| tracing::Dispatch::new(tracing_subscriber::registry()));
        let spans = Spans::default();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(spans.clone()));
        (dispatch, spans)
    })
}

/// The spans of the turn `turn`.
fn spans_of(turn: &str) -> Vec<SeenSpan> {
    let (_, spans) = subscriber();
    let open = spans.0.lock().unwrap();
    let finished = FINISHED.lock().unwrap();
    open.values()
        .chain(finished.iter())
        .filter(|span| span.turn.as_deref() == Some(turn))
        .cloned()
        .collect()
}

/// How a test's run is polled: on the thread that holds the scoped subscriber, or spawned onto
/// the runtime's workers carrying it.
#[derive(Clone, Copy, Debug)]
enum Polled {
    Here,
    Spawned,
}

/// One run under the test subscriber, scoped to this thread, polled as `polled` says: the spans
/// of its turn, and the span current in the binding closure.
fn traced_run(polled: Polled) -> (Vec<SeenSpan>, Vec<Option<&'static str>>) {
    static TURNS: AtomicUsize = AtomicUsize::new(0);
    let turn = TURNS.fetch_add(1, Ordering::SeqCst).to_string();
    let inside = Arc::new(Mutex::new(Vec::new()));
    tracing::dispatcher::with_default(&subscriber().0, || {
        tokio().block_on(async {
            let current = inside.clone();
            let tools = CodeBindingNamespace::new("tools").function(
                "search",
                binding(move |_| {
                    let span = tracing::Span::current();
                    current.lock().unwrap().push(span.metadata().map(|m| m.name()));
                    async { Err(BindingError::new("no")) }
                }),
            );
            let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 8);
            let caller = tracing::info_span!("agent.turn", turn = %turn);
            let request = CodeRunRequest::new("p").binding(tools);
            let task = {
                let runtime = runtime.clone();
                tracing::Instrument::instrument(
                    async move { runtime.run(request).await.unwrap() },
                    caller,
                )
            };
            let script = async {
                let mut script = scripts.recv().await.unwrap();
                script.events.send(Event::Log("hello".into())).unwrap();
                assert!(answer(&mut script, 1, 0).await.is_err());
                script.events.send(Event::Ended(Ending::Completed(Some(json!("done"))))).unwrap();
            };
            let result = match polled {
                Polled::Here => tokio::join!(task, script).0,
                // The subscriber is this thread's; the run is polled on the runtime's workers,
                // so the task carries it there, as a host that scopes its subscriber does.
                Polled::Spawned => {
                    let task = tracing::instrument::WithSubscriber::with_current_subscriber(task);
                    let run = tokio::spawn(task);
                    script.await;
                    run.await.unwrap()
                }
            };
            assert_eq!(result.logs(), ["hello"]);
        });
    });
    let inside = inside.lock().unwrap().clone();
    (spans_of(&turn), inside)
}

#[test]
fn a_run_span_holds_a_span_per_call_and_the_closure_runs_inside_it() {
    let (spans, inside) = traced_run(Polled::Spawned);
    assert_eq!(inside, [Some("code_runtime.call")]);
    let find = |name: &str| {
        let found: Vec<_> = spans.iter().filter(|span| span.name == name).cloned().collect();
        assert_eq!(found.len(), 1, "one {name} span: {spans:?}");
        found[0].clone()
    };
    let run = find("code_runtime.run");
    assert_eq!(run.parent, Some("agent.turn"), "parented under the caller's span");
    for (field, value) in [
        ("language", "typescript"),
        ("isolation", "worker-thread"),
        ("kind", "ok"),
        ("calls", "1"),
        // What the output budget charged: `["hello"]` and `"done"`.
        ("output_bytes", "15"),
    ] {
        assert_eq!(run.fields.get(field).map(String::as_str), Some(value), "{field}: {run:?}");
    }
    for field in ["wall_ms", "compute_ms"] {
        let value: f64 = run.fields[field].parse().expect("a number");
        assert!(value >= 0.0, "{field}: {run:?}");
    }
    let call = find("code_runtime.call");
    assert_eq!(call.parent, Some("code_runtime.run"));
    assert_eq!(call.fields.get("namespace").map(String::as_str), Some("tools"));
    assert_eq!(call.fields.get("function").map(String::as_str), Some("search"));
    assert_eq!(call.fields.get("ok").map(String::as_str), Some("false"));
    assert!(call.fields.get("duration_ms").is_some_and(|ms| ms.parse::<f64>().is_ok()));
}

#[test]
fn spans_follow_a_scoped_subscriber_across_the_threads_of_a_multi_thread_runtime() {
    // Many times, and both ways: whichever worker polls the run, and whichever thread the
    // closure's call span is made on, the caller's subscriber sees them all.
    for round in 0..40 {
        let polled = if round % 2 == 0 { Polled::Here } else { Polled::Spawned };
        let (spans, inside) = traced_run(polled);
        assert_eq!(inside, [Some("code_runtime.call")], "{polled:?}, round {round}");
        let names: Vec<&str> = spans.iter().map(|span| span.name).collect();
        for name in ["agent.turn", "code_runtime.run", "code_runtime.call"] {
            assert_eq!(
                names.iter().filter(|seen| **seen == name).count(),
                1,
                "{polled:?}: {names:?}"
            );
        }
        let run = spans.iter().find(|span| span.name == "code_runtime.run").unwrap();
        assert_eq!(run.parent, Some("agent.turn"), "{polled:?}");
        assert_eq!(run.fields.get("kind").map(String::as_str), Some("ok"), "{polled:?}: {run:?}");
    }
}

#[test]
fn an_approved_call_names_who_approved_it_and_the_run_counts_its_approvals() {
    let turn = "approvals";
    tracing::dispatcher::with_default(&subscriber().0, || {
        tokio().block_on(async {
            let tools = CodeBindingNamespace::new("tools").function(
                "delete",
                binding(|_| async { Ok(json!(true)) }).approval(code_runtime::ApprovalRule::Always),
            );
            let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 8);
            let request = CodeRunRequest::new("p")
                .binding(tools)
                .approvals(code_runtime::Approvals::new(code_runtime::Decision::Allow));
            let task = tracing::Instrument::instrument(
                async move { runtime.run(request).await.unwrap() },
                tracing::info_span!("agent.turn", turn = %turn),
            );
            let script = async {
                let mut script = scripts.recv().await.unwrap();
                assert!(answer(&mut script, 1, 0).await.is_ok());
                script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
            };
            assert!(tokio::join!(task, script).0.is_ok());
        });
    });
    let spans = spans_of(turn);
    let field = |name: &str, field: &str| {
        let span = spans.iter().find(|span| span.name == name).expect(name);
        span.fields.get(field).cloned()
    };
    assert_eq!(field("code_runtime.run", "approvals").as_deref(), Some("1"), "{spans:?}");
    assert_eq!(field("code_runtime.call", "approved_by").as_deref(), Some("policy"), "{spans:?}");
}

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
    Event::Call { id, function: FunctionId(function), args: BindingArgs::new(json!({ "n": id })) }
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
    let (runtime, mut scripts) = FakeProvider::new("test", limits, 8);
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
fn calls_in_flight_are_bounded_and_a_settled_one_frees_its_place() {
    tokio().block_on(async {
        let ran = Arc::new(AtomicUsize::new(0));
        let limits = Limits { max_pending_calls: 2, ..Limits::default() };
        let (mut script, run) =
            start(limits, CodeRunRequest::new("p").binding(tools(ran.clone()))).await;
        script.events.send(call(1, 2)).unwrap();
        script.events.send(call(2, 2)).unwrap();
        refused(
            answer(&mut script, 3, 0).await,
            r#"binding "tools.a" was not called: at most 2 binding calls may be in flight at once (await some first)"#,
            "maxPendingCalls",
            2,
        );
        assert_eq!(ran.load(Ordering::SeqCst), 2, "only the two hanging calls ran");
        script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        run.await.unwrap();

        // Calls that settled are no longer in flight.
        let limits = Limits { max_pending_calls: 1, ..Limits::default() };
        let (mut script, run) = start(limits, CodeRunRequest::new("p").binding(tools(ran))).await;
        for id in 1..=5 {
            assert!(answer(&mut script, id, 0).await.is_ok());
        }
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
        let (runtime, mut scripts) = FakeProvider::new("test", Limits::default(), 8);
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

/// A span as the test layer saw it: its name, its fields, its parent's name, and whether a
/// binding closure ran inside it.
#[derive(Clone, Debug, Default)]
struct SeenSpan {
    name: &'static str,
    fields: HashMap<&'static str, String>,
    parent: Option<&'static str>,
}

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
        seen.parent = cx.span(id).and_then(|span| span.parent()).map(|parent| parent.name());
        self.0.lock().unwrap().insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, _cx: Context<'_, S>) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
}

#[test]
fn a_run_span_holds_a_span_per_call_and_the_closure_runs_inside_it() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    tracing::subscriber::with_default(subscriber, || {
        tokio().block_on(async {
            let inside = Arc::new(Mutex::new(Vec::new()));
            let current = inside.clone();
            let tools = CodeBindingNamespace::new("tools").function(
                "search",
                binding(move |_| {
                    let span = tracing::Span::current();
                    current.lock().unwrap().push(span.metadata().map(|m| m.name()));
                    async { Err(BindingError::new("no")) }
                }),
            );
            let (runtime, mut scripts) = FakeProvider::new("test", Limits::default(), 8);
            let caller = tracing::info_span!("agent.turn");
            let run = {
                let runtime = runtime.clone();
                let request = CodeRunRequest::new("p").binding(tools);
                tokio::spawn(tracing::Instrument::instrument(
                    async move { runtime.run(request).await.unwrap() },
                    caller,
                ))
            };
            let mut script = scripts.recv().await.unwrap();
            script.events.send(Event::Log("hello".into())).unwrap();
            assert!(answer(&mut script, 1, 0).await.is_err());
            script.events.send(Event::Ended(Ending::Completed(Some(json!("done"))))).unwrap();
            let result = run.await.unwrap();
            assert_eq!(result.logs(), ["hello"]);
            assert_eq!(*inside.lock().unwrap(), [Some("code_runtime.call")]);
        });
    });
    let spans = spans.0.lock().unwrap();
    let find = |name: &str| {
        let found: Vec<_> = spans.values().filter(|span| span.name == name).cloned().collect();
        assert_eq!(found.len(), 1, "one {name} span: {spans:?}");
        found[0].clone()
    };
    let run = find("code_runtime.run");
    assert_eq!(run.parent, Some("agent.turn"), "parented under the caller's span");
    for (field, value) in [
        ("language", "test"),
        ("isolation", "script"),
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

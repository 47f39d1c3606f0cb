//! A host that exports its traces with OpenTelemetry: the model's program is one span
//! (`code_runtime.run`) under the host's own span for the agent turn, and each tool call the
//! program makes is a child span (`code_runtime.call`) with the host closure's own spans inside
//! it, exactly as a tracing backend (Jaeger, Tempo, Honeycomb, …) would show them.
//!
//! `cargo run -p code-runtime-cli --example opentelemetry` (offline, with `RUSTY_V8_ARCHIVE`
//! exported as `.ci/run` does). It prints the exported spans as a tree and fails if a call span
//! is not nested under its run.
//!
//! The bridge is `tracing-opentelemetry`'s layer; the exporter here keeps the spans in memory so
//! the example can print them. A real host swaps it for `opentelemetry-otlp`'s exporter (and a
//! batch processor) and changes nothing else.
#![allow(clippy::print_stdout, reason = "an example prints what it shows")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_runtime::json;
use code_runtime::{CodeBindingNamespace, CodeRunRequest, CodeRuntime, binding};
use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};
use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// An exporter that keeps what it is handed (where an OTLP exporter would send it).
#[derive(Clone, Debug, Default)]
struct Kept(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Kept {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().expect("the span list is never poisoned").extend(batch);
        Ok(())
    }
}

/// The agent's tools: a search whose host side makes a (pretend) HTTP request of its own.
fn tools() -> CodeBindingNamespace {
    let search = binding(|args| async move {
        let query = args["q"].as_str().unwrap_or_default().to_owned();
        // The closure runs inside the call's span, so this span is its child.
        let request = tracing::info_span!("http.request", url = %format!("https://search.example/?q={query}"));
        async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(json!({ "hits": [format!("{query}: the definitive guide")] }))
        }
        .instrument(request)
        .await
    });
    CodeBindingNamespace::new("tools").function("search", search)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let kept = Kept::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(kept.clone()).build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("agent-host")));
    tracing::subscriber::set_global_default(subscriber)?;

    let runtime = WorkerThreadCodeRuntime::new(WorkerThreadConfig::default())?;
    let program = r#"
const topics = ["rust", "v8", "python"];
const results = await Promise.all(topics.map((q) => tools.search({ q })));
return results.map((r) => r.hits[0]);
"#;
    let turn = tracing::info_span!("agent.turn", turn = 1);
    let result =
        runtime.run(CodeRunRequest::new(program).binding(tools())).instrument(turn).await?;
    println!("result: {}", result.to_json());
    runtime.dispose().await;
    provider.force_flush()?;

    let spans = kept.0.lock().expect("the span list is never poisoned").clone();
    print_tree(&spans, SpanId::INVALID, 0);
    check_nesting(&spans)?;
    provider.shutdown()?;
    Ok(())
}

/// Prints the spans under `parent` (the roots, for `SpanId::INVALID`), with their attributes.
fn print_tree(spans: &[SpanData], parent: SpanId, depth: usize) {
    let mut children: Vec<&SpanData> =
        spans.iter().filter(|span| span.parent_span_id == parent).collect();
    children.sort_by_key(|span| span.start_time);
    for span in children {
        let attributes: Vec<String> = span
            .attributes
            .iter()
            // What `tracing-opentelemetry` adds of its own (source location, thread, target,
            // busy and idle time) is left out of the picture.
            .filter(|kv| {
                let key = kv.key.as_str();
                !["code.", "thread.", "target", "busy_ns", "idle_ns"]
                    .iter()
                    .any(|own| key.starts_with(own))
            })
            .map(|kv| format!("{}={}", kv.key, kv.value))
            .collect();
        println!("{}{} {}", "  ".repeat(depth), span.name, attributes.join(" "));
        print_tree(spans, span.span_context.span_id(), depth + 1);
    }
}

/// The parentage a tracing backend must see: turn → run → three calls → their HTTP requests.
fn check_nesting(spans: &[SpanData]) -> Result<(), String> {
    let named = |name: &'static str| spans.iter().filter(move |span| span.name == name);
    let one = |name: &'static str| match named(name).collect::<Vec<_>>()[..] {
        [span] => Ok(span),
        ref found => Err(format!("expected one {name} span, found {}", found.len())),
    };
    let (turn, run) = (one("agent.turn")?, one("code_runtime.run")?);
    if run.parent_span_id != turn.span_context.span_id() {
        return Err("the run span is not a child of the turn's".to_owned());
    }
    let calls: Vec<&SpanData> = named("code_runtime.call").collect();
    if calls.len() != 3
        || calls.iter().any(|call| call.parent_span_id != run.span_context.span_id())
    {
        return Err(format!("expected three call spans under the run, found {}", calls.len()));
    }
    let requests = named("http.request")
        .filter(|request| {
            calls.iter().any(|call| call.span_context.span_id() == request.parent_span_id)
        })
        .count();
    if requests != 3 {
        return Err(format!("expected an http.request span inside each call, found {requests}"));
    }
    if spans.iter().any(|span| span.span_context.trace_id() != turn.span_context.trace_id()) {
        return Err("every span belongs to the turn's trace".to_owned());
    }
    Ok(())
}

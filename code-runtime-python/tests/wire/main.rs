//! docs/python-frame-protocol.md is kept true here: its transcript is what a real run through the
//! provider (its cell, its bootstrap) puts on the wire, as the provider reports it on the
//! `code_runtime_python::wire` tracing target. (That the host's lines are what its frame builders
//! write, and that it reads every child line, is `frame.rs`'s unit test of the same transcript.)
//!
//! A test binary of its own: tracing decides once per call site, for the whole process, whether
//! anyone listens, and runs of other tests on other threads met the wire's call sites before
//! this test's subscriber existed (it then missed frames now and then).

use std::sync::{Arc, Mutex};

use code_runtime::{BindingError, CodeBindingNamespace, CodeRunRequest, CodeRuntime, binding};
use code_runtime_python::{PythonCodeRuntime, PythonConfig};
use tracing::field::{Field, Visit};

/// The transcript block of the protocol document: `host> ` and `child> ` lines.
fn transcript() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/python-frame-protocol.md"
    ))
    .unwrap();
    let start = doc.find("```transcript\n").expect("the document has a transcript block")
        + "```transcript\n".len();
    let end = start + doc[start..].find("```").unwrap();
    doc[start..end].lines().filter(|line| !line.is_empty()).map(str::to_owned).collect()
}

/// Collects the wire events of the runs made while it is the thread's subscriber.
#[derive(Default)]
struct Wire(Mutex<Vec<String>>);

impl tracing::Subscriber for Wire {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target() == "code_runtime_python::wire"
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        #[derive(Default)]
        struct Line {
            direction: String,
            frame: Option<String>,
            prelude: bool,
        }
        impl Visit for Line {
            fn record_str(&mut self, field: &Field, value: &str) {
                if field.name() == "direction" {
                    self.direction = value.to_owned();
                }
            }
            fn record_u64(&mut self, field: &Field, _: u64) {
                self.prelude |= field.name() == "prelude_bytes";
            }
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "frame" {
                    self.frame = Some(format!("{value:?}"));
                }
            }
        }
        let mut line = Line::default();
        event.record(&mut line);
        let text = match (line.frame, line.prelude) {
            (Some(frame), _) => frame,
            (None, true) => "(prelude)".to_owned(),
            (None, false) => return,
        };
        self.0.lock().unwrap().push(format!("{}> {text}", line.direction));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn c173_c174_the_documented_transcript_is_what_a_run_puts_on_the_wire() {
    let program = "print(\"hello\")\nr = await tools.echo({\"n\": 2**60})\ntry:\n    await tools.echo(None)\nexcept ToolCallError as e:\n    print(e.toolName, e)\nreturn r";
    let calls = Arc::new(Mutex::new(0));
    let echo = binding(move |args| {
        let calls = calls.clone();
        async move {
            let mut calls = calls.lock().unwrap();
            *calls += 1;
            if *calls == 1 { Ok(args.into()) } else { Err(BindingError::new("denied")) }
        }
    });
    let tools = CodeBindingNamespace::new("tools")
        .error_class("ToolCallError", "toolName")
        .function("echo", echo);
    // Without a warm cell, the whole exchange (the prelude included, which a warm cell gets
    // when it starts) happens inside this run.
    let runtime = PythonCodeRuntime::new(PythonConfig {
        limits: code_runtime::Limits { max_output_bytes: 65_536, ..Default::default() },
        warm_cell: false,
        ..PythonConfig::default()
    })
    .unwrap();
    let wire = Arc::new(Wire::default());
    // The host loop runs on this thread (no executor of its own), so this thread's subscriber
    // sees every frame.
    let result = tracing::subscriber::with_default(wire.clone(), || {
        futures::executor::block_on(
            runtime.run(CodeRunRequest::new(program).binding(tools.clone())),
        )
    })
    .unwrap();
    assert_eq!(
        result.to_json(),
        r#"{"logs":["hello","echo denied"],"value":{"n":1152921504606847000}}"#
    );
    let recorded = wire.0.lock().unwrap().clone();
    assert_eq!(recorded, transcript(), "the document's transcript differs from the wire");
}

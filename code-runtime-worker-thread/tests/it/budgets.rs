//! Budgets, disposal and output limits where TypeScript has its own cases. The cases both
//! languages share are in the provider suites (`conformance/tests/it/providers/budgets.rs`).

use std::time::Duration;

use code_runtime::FailureKind;
use code_runtime::json;

use crate::*;

#[test]
fn c054_tiny_cap_and_a_strip_failure() {
    let runtime = runtime(Limits { max_output_bytes: 4, ..Limits::default() });
    assert_eq!(
        run_on(&runtime, CodeRunRequest::new("const = ;\nreturn 1")).to_json(),
        r#"{"logs":[],"error":{"kind":"output-limit","message":""}}"#
    );
}

#[test]
fn c056_out_of_memory_is_contained() {
    let runtime = runtime(Limits { max_memory_mb: 32, ..Limits::default() });
    let result = run_on(
        &runtime,
        CodeRunRequest::new(
            "const hog: number[][] = []; for (;;) hog.push(new Array(10_000).fill(1));",
        ),
    );
    assert_eq!(
        result.error().map(|e| e.kind()),
        Some(FailureKind::WorkerExit),
        "{}",
        result.to_json()
    );
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
}

#[test]
fn array_buffers_draw_on_the_memory_budget() {
    let runtime = runtime(Limits { max_memory_mb: 64, ..Limits::default() });
    let program = "const held: Uint8Array[] = []; for (let i = 0; i < 8 * 1024; i++) held.push(new Uint8Array(1 << 20)); return held.length";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    // V8 counts backing stores towards its own heap pressure too, so the run ends either by the
    // allocator refusing (a `RangeError` the program sees) or by the heap limit; never the host.
    let error = result.error().expect("8 GiB cannot fit in 64 MB");
    let refused =
        error.kind() == FailureKind::Exception && error.message().starts_with("RangeError");
    assert!(refused || error.kind() == FailureKind::WorkerExit, "{}", result.to_json());
    assert_eq!(
        value(&run_on(&runtime, CodeRunRequest::new("return new Uint8Array(1 << 20).length"))),
        &json!(1 << 20)
    );
}

#[test]
fn c060_runaway_logs() {
    let runtime = runtime(Limits { max_output_bytes: 300, ..Limits::default() });
    let result = run_on(
        &runtime,
        CodeRunRequest::new("for (let i = 0; i < 1000; i++) console.log('spam line', i); return 1"),
    );
    let mut expected: Vec<String> = (0..18).map(|i| format!("spam line {i}")).collect();
    expected.push("spa".to_owned());
    assert_eq!(result.logs(), expected);
    assert_eq!(
        failure(&result),
        Some(("output-limit", "outer output exceeded 300 bytes".to_owned()))
    );
}

#[test]
fn c063_c064_c065_exact_ledger() {
    let seven = runtime(Limits { max_output_bytes: 7, ..Limits::default() });
    assert_eq!(
        run_on(&seven, CodeRunRequest::new("return '€'")).to_json(),
        r#"{"logs":[],"value":"€"}"#
    );
    let eleven = runtime(Limits { max_output_bytes: 11, ..Limits::default() });
    assert_eq!(
        run_on(&eleven, CodeRunRequest::new("console.log('abc'); return 'xy'")).to_json(),
        r#"{"logs":["abc"],"value":"xy"}"#
    );
    assert_eq!(
        run_on(&eleven, CodeRunRequest::new("console.log('abc'); throw 'xy'")).to_json(),
        r#"{"logs":["abc"],"error":{"kind":"exception","message":"xy"}}"#
    );
    let ten = runtime(Limits { max_output_bytes: 10, ..Limits::default() });
    assert_eq!(
        run_on(&ten, CodeRunRequest::new("console.log('abc'); return 'xy'")).to_json(),
        r#"{"logs":[],"error":{"kind":"output-limit","message":"outer "}}"#
    );
}

#[test]
fn c066_giant_stack_never_crosses() {
    let runtime = runtime(Limits { max_output_bytes: 64, ..Limits::default() });
    assert_eq!(
        run_on(&runtime, CodeRunRequest::new("throw new Error('x'.repeat(1_000_000))")).to_json(),
        r#"{"logs":[],"error":{"kind":"output-limit","message":"outer output exceeded 64 bytes"}}"#
    );
}

#[test]
fn c069_c070_default_cap_boundary() {
    let fits = run("return 'x'.repeat(67_108_860)", vec![]);
    assert_eq!(value(&fits).as_str().map(str::len), Some(67_108_860));
    let over = run("return 'x'.repeat(67_108_861)", vec![]);
    assert_eq!(
        failure(&over),
        Some(("output-limit", "outer output exceeded 67108864 bytes".to_owned()))
    );
}

#[test]
fn c031_c103_dispose_reaches_quiescence() {
    let runtime = std::sync::Arc::new(runtime(Limits::default()));
    let result = tokio().block_on(async {
        let running = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("for (;;) {}")).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        runtime.dispose().await;
        running.await.unwrap().unwrap()
    });
    assert_eq!(failure(&result), Some(("abort", "runtime disposed".to_owned())));
    let error = tokio().block_on(runtime.run(CodeRunRequest::new("return 1"))).unwrap_err();
    assert!(error.to_string().contains("after disposal"), "{error}");
}

#[test]
fn dropping_the_run_future_stops_the_isolate() {
    let runtime = runtime(Limits::default());
    tokio().block_on(async {
        let dropped = tokio::time::timeout(
            Duration::from_millis(200),
            runtime.run(CodeRunRequest::new("for (;;) {}")),
        )
        .await;
        assert!(dropped.is_err(), "the loop never ends by itself");
        // dispose waits for the background join of the dropped run's thread.
        tokio::time::timeout(Duration::from_secs(10), runtime.dispose())
            .await
            .expect("the isolate thread was joined");
    });
}

#[test]
fn dropping_the_run_future_before_the_isolate_exists_still_stops_it() {
    // The drop can land before the isolate thread has attached its handle; the recorded reason
    // then stops the isolate as soon as it exists, and dispose still returns.
    let runtime = runtime(Limits::default());
    tokio().block_on(async {
        for _ in 0..20 {
            let _ = tokio::time::timeout(
                Duration::from_micros(1),
                runtime.run(CodeRunRequest::new("for (;;) {}")),
            )
            .await;
        }
        tokio::time::timeout(Duration::from_secs(20), runtime.dispose())
            .await
            .expect("every isolate thread was joined");
    });
}

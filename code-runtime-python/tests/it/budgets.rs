//! Budgets, cancellation and output limits where Python has its own cases: docs/reference.md
//! §5.5, §5.6 and C183. The cases both languages share are in the provider suites
//! (`conformance/tests/it/providers/budgets.rs`).

use std::time::Duration;

use code_runtime::json;
use code_runtime::{CancellationToken, FailureKind};

use crate::*;

#[test]
fn c183_compute_budget_stops_a_hot_loop() {
    let runtime = runtime(Limits { compute_ms: 500, ..Limits::default() });
    let result = run_on(&runtime, CodeRunRequest::new("while True:\n    pass"));
    assert_eq!(
        result.to_json(),
        r#"{"logs":[],"error":{"kind":"timeout","message":"compute budget exhausted (500ms busy)"}}"#
    );
}

#[test]
fn c055_late_resolution_is_dropped() {
    let signal = CancellationToken::new();
    let cancel = signal.clone();
    let late = binding(move |_| {
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(json!("too-late"))
        }
    });
    let request = CodeRunRequest::new("return await tools.late({})")
        .binding(tools().function("late", late))
        .signal(signal);
    let result = run_on(default_runtime(), request);
    assert_eq!(result.to_json(), r#"{"logs":[],"error":{"kind":"abort","message":"cancelled"}}"#);
    // The runtime is still healthy afterwards.
    assert_eq!(value(&run("return 2", vec![])), &json!(2));
}

#[test]
fn c062_oversized_return() {
    let runtime = runtime(Limits { max_output_bytes: 64, ..Limits::default() });
    let result = run_on(&runtime, CodeRunRequest::new("return \"y\" * 10000"));
    assert_eq!(
        result.to_json(),
        r#"{"logs":[],"error":{"kind":"output-limit","message":"outer output exceeded 64 bytes"}}"#
    );
}

#[test]
fn c064_c065_combined_ledger() {
    let eleven = runtime(Limits { max_output_bytes: 11, ..Limits::default() });
    let ten = runtime(Limits { max_output_bytes: 10, ..Limits::default() });
    assert_eq!(
        run_on(&eleven, CodeRunRequest::new("print(\"abc\")\nreturn \"xy\"")).to_json(),
        r#"{"logs":["abc"],"value":"xy"}"#
    );
    assert_eq!(
        run_on(&ten, CodeRunRequest::new("print(\"abc\")\nreturn \"xy\"")).to_json(),
        r#"{"logs":[],"error":{"kind":"output-limit","message":"outer "}}"#
    );
}

#[test]
fn c179_log_overflow_is_an_output_limit() {
    // docs/design.md §9.1: one ledger and one failure semantics, not the reference's in-band marker.
    let runtime = runtime(Limits { max_output_bytes: 300, ..Limits::default() });
    let result = run_on(
        &runtime,
        CodeRunRequest::new("for i in range(10000):\n    print(\"spam\", i)\nreturn 1"),
    );
    assert_eq!(
        failure(&result),
        Some(("output-limit", "outer output exceeded 300 bytes".to_owned()))
    );
    assert!(result.logs().len() > 10 && result.logs()[0] == "spam 0", "{:?}", result.logs());
}

#[test]
fn c182_raw_writes_share_the_ledger() {
    let runtime = runtime(Limits { max_output_bytes: 80, ..Limits::default() });
    let program = "import os\nos.write(1, b\"a\" * 20 + b\"\\n\")\nos.write(2, b\"b\" * 100 + b\"\\n\")\nimport time\ntime.sleep(5)\nreturn 1";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    assert_eq!(result.error().map(|e| e.kind()), Some(FailureKind::OutputLimit));
    assert_eq!(result.logs()[0], "a".repeat(20));
    assert!(result.logs()[1].chars().all(|c| c == 'b') && !result.logs()[1].is_empty());
}

#[test]
fn raw_writes_after_prints_are_captured() {
    let result = run(
        "import os\nprint(\"printed\")\nos.write(1, b\"raw-out\\n\")\nos.write(2, b\"raw-err\")\nreturn 1",
        vec![],
    );
    let mut logs = result.logs().to_vec();
    logs.sort();
    assert_eq!(logs, ["printed", "raw-err", "raw-out"]);
}

#[test]
fn memory_budget_is_contained() {
    let runtime = runtime(Limits { max_memory_mb: 256, ..Limits::default() });
    let result = run_on(&runtime, CodeRunRequest::new("hog = bytearray(1 << 30)\nreturn len(hog)"));
    let error = result.error().expect("the allocation fails");
    assert!(
        error.kind() == FailureKind::Exception && error.message().ends_with("MemoryError")
            || error.kind() == FailureKind::WorkerExit,
        "{}",
        result.to_json()
    );
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
}

#[test]
fn ten_megabytes_of_prints() {
    let result = run("for _ in range(10000):\n    print(\"x\" * 1000)\nreturn \"done\"", vec![]);
    assert_eq!(value(&result), &json!("done"));
    assert_eq!(result.logs().len(), 10_000);
}

#[test]
fn dropping_the_run_future_kills_the_cell() {
    let announced = Announced::default();
    let program = format!("{ANNOUNCE}while True:\n    pass");
    let request = CodeRunRequest::new(program).binding(announced.namespace());
    tokio().block_on(async {
        let run = default_runtime().run(request);
        tokio::pin!(run);
        let waited = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                tokio::select! {
                    _ = &mut run => unreachable!("the program never ends"),
                    () = tokio::time::sleep(Duration::from_millis(20)) => if announced.get().is_some() { break },
                }
            }
        })
        .await;
        assert!(waited.is_ok(), "the program never announced itself");
    });
    // The future is dropped now; the kill is immediate and the reap happens in the background.
    assert_gone(announced.get().unwrap());
}

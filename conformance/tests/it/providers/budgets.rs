//! Budgets, cancellation and output limits on every provider: docs/reference.md §5.5 and §5.6
//! (cases C048 to C051 and C073).

use std::time::Duration;

use code_runtime::{CancellationToken, CodeRunRequest, Limits, binding, json};

use super::{each_provider, failure, never, run_on, tokio, tools, value};

#[test]
fn c048_compute_budget_with_a_pending_decoy_call() {
    // Python's form of the case (C048p) schedules the call without awaiting it, as
    // `void tools.slow({})` does.
    each_provider(|provider| {
        let runtime =
            provider.with(Limits { compute_ms: 300, max_wall_ms: 30_000, ..Limits::default() });
        let program = provider.program(
            "void tools.slow({}); for (;;) {}",
            "import asyncio\nasyncio.ensure_future(tools.slow({}))\nwhile True:\n    pass",
        );
        let request = CodeRunRequest::new(program).binding(tools().function("slow", never()));
        assert_eq!(
            run_on(runtime.as_ref(), request).to_json(),
            r#"{"logs":[],"error":{"kind":"timeout","message":"compute budget exhausted (300ms busy)"}}"#,
            "{provider}"
        );
    });
}

#[test]
fn c049_idle_time_is_not_compute() {
    each_provider(|provider| {
        let runtime =
            provider.with(Limits { compute_ms: 1_000, max_wall_ms: 30_000, ..Limits::default() });
        let slow = binding(|_| async {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            Ok(json!("slow-done"))
        });
        let request = CodeRunRequest::new("return await tools.slow({})")
            .binding(tools().function("slow", slow));
        assert_eq!(value(&run_on(runtime.as_ref(), request)), &json!("slow-done"), "{provider}");
    });
}

#[test]
fn c050_wall_clock_ceiling() {
    each_provider(|provider| {
        let runtime =
            provider.with(Limits { compute_ms: 30_000, max_wall_ms: 400, ..Limits::default() });
        let program =
            provider.program("await tools.never({}); return 1", "await tools.never({})\nreturn 1");
        let request = CodeRunRequest::new(program).binding(tools().function("never", never()));
        assert_eq!(
            run_on(runtime.as_ref(), request).to_json(),
            r#"{"logs":[],"error":{"kind":"timeout","message":"wall-clock ceiling reached (400ms)"}}"#,
            "{provider}"
        );
    });
}

#[test]
fn c051_cancel_mid_loop() {
    // The message is `cancelled`: a token has no reason to give.
    each_provider(|provider| {
        let signal = CancellationToken::new();
        let cancel = signal.clone();
        let program = provider.program(
            "console.log('spinning'); for (;;) {}",
            "print('spinning', flush=True)\nwhile True:\n    pass",
        );
        let request = CodeRunRequest::new(program).signal(signal);
        let result = tokio().block_on(async {
            let running = provider.runtime().run(request);
            let cancelling = async {
                tokio::time::sleep(Duration::from_millis(150)).await;
                cancel.cancel();
            };
            let (result, ()) = tokio::join!(running, cancelling);
            result.unwrap()
        });
        assert_eq!(failure(&result), Some(("abort", "cancelled".to_owned())), "{provider}");
    });
}

#[test]
fn c073_output_limit_masks_a_timeout() {
    each_provider(|provider| {
        let runtime =
            provider.with(Limits { max_output_bytes: 40, max_wall_ms: 300, ..Limits::default() });
        let program = provider.program(
            "console.log('x'.repeat(20)); await tools.never({})",
            "print('x' * 20)\nawait tools.never({})",
        );
        let request = CodeRunRequest::new(program).binding(tools().function("never", never()));
        assert_eq!(
            run_on(runtime.as_ref(), request).to_json(),
            r#"{"logs":["xxxx"],"error":{"kind":"output-limit","message":"outer output exceeded 40 bytes"}}"#,
            "{provider}"
        );
    });
}

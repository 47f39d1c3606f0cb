//! The host API as a host meets it: per-request limits, the cap on runs in flight, the in-flight
//! call rule, executors that are not tokio, and program getters that re-enter the bridge.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use code_runtime::json;
use code_runtime::{RunLimits, binding};
use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};

use crate::*;

#[test]
fn getters_that_call_bindings_and_timers_during_conversion() {
    // A conversion runs program getters; a getter that calls a binding or `setTimeout` re-enters
    // the run's state, which no conversion may hold borrowed.
    let program = r#"
let reads = 0;
const argument = { get a() { reads++; tools.echo({ from: "argument getter" }); setTimeout(() => {}, 0); return 1; } };
const first = await tools.echo(argument);
const result = { get b() { reads++; tools.echo({ from: "result getter" }); setTimeout(() => {}, 0); return 2; } };
return [first, result, { late: { get c() { return reads; } } }];
"#;
    let result = run(program, vec![tools().function("echo", echo())]);
    assert_eq!(value(&result), &json!([{"a": 1}, {"b": 2}, {"late": {"c": 2}}]));
}

#[test]
fn a_request_tightens_the_provider_limits() {
    let spin = CodeRunRequest::new("for (;;) {}")
        .limits(RunLimits { compute_ms: Some(50), ..RunLimits::default() });
    assert_eq!(
        failure(&run_on(default_runtime(), spin)),
        Some(("timeout", "compute budget exhausted (50ms busy)".to_owned()))
    );
    let chatty = CodeRunRequest::new("return 'y'.repeat(100)")
        .limits(RunLimits { max_output_bytes: Some(40), ..RunLimits::default() });
    assert_eq!(
        failure(&run_on(default_runtime(), chatty)),
        Some(("output-limit", "outer output exceeded 40 bytes".to_owned()))
    );
    let hog = CodeRunRequest::new("const a = []; for (;;) a.push(new Array(10_000).fill(1));")
        .limits(RunLimits { max_memory_mb: Some(32), ..RunLimits::default() });
    assert_eq!(
        failure(&run_on(default_runtime(), hog)),
        Some((
            "worker-exit",
            "worker error: out of memory: the program exceeded its 32 MB memory budget".to_owned()
        ))
    );
    let looser = CodeRunRequest::new("return 1")
        .limits(RunLimits { compute_ms: Some(60_001), ..RunLimits::default() });
    let error = tokio().block_on(default_runtime().run(looser)).unwrap_err();
    assert!(error.to_string().contains("request limit compute_ms"), "{error}");
}

/// A binding that records when it is called and when its future is dropped, and never settles.
fn hanging(started: &Arc<AtomicUsize>, dropped: &Arc<AtomicBool>) -> BindingFunction {
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let (started, dropped) = (started.clone(), dropped.clone());
    binding(move |_| {
        started.fetch_add(1, Ordering::SeqCst);
        let guard = Guard(dropped.clone());
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(JsonValue::Null)
        }
    })
}

#[test]
fn calls_in_flight_are_cancelled_when_the_run_ends() {
    for (program, kind) in [
        ("tools.hang({}); return 1", None),
        ("tools.hang({}); throw new Error('boom')", Some("exception")),
        ("tools.hang({}); for (;;) {}", Some("timeout")),
    ] {
        let (started, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let namespace = tools().function("hang", hanging(&started, &dropped));
        let request = CodeRunRequest::new(program)
            .binding(namespace)
            .limits(RunLimits { compute_ms: Some(100), ..RunLimits::default() });
        let result = run_on(default_runtime(), request);
        assert_eq!(result.error().map(|error| error.kind().as_str()), kind, "{program}");
        assert_eq!(started.load(Ordering::SeqCst), 1, "{program}: the call started when made");
        assert!(dropped.load(Ordering::SeqCst), "{program}: cancelled before run returned");
    }
}

#[test]
fn runs_beyond_the_cap_wait_for_a_slot() {
    let runtime = Arc::new(
        WorkerThreadCodeRuntime::new(WorkerThreadConfig {
            max_concurrent_runs: 2,
            ..WorkerThreadConfig::default()
        })
        .unwrap(),
    );
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Arc::new(AtomicUsize::new(0));
    let wait = {
        let (gate, entered) = (gate.clone(), entered.clone());
        binding(move |_| {
            entered.fetch_add(1, Ordering::SeqCst);
            let gate = gate.clone();
            async move {
                let _permit = gate.acquire().await.map_err(|error| error.to_string())?;
                Ok(json!("through"))
            }
        })
    };
    tokio().block_on(async {
        let runs: Vec<_> = (0..3)
            .map(|_| {
                let runtime = runtime.clone();
                let request = CodeRunRequest::new("return await tools.wait({})")
                    .binding(tools().function("wait", wait.clone()));
                tokio::spawn(async move { runtime.run(request).await })
            })
            .collect();
        while entered.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(entered.load(Ordering::SeqCst), 2, "the third run waits for a slot");
        gate.add_permits(3);
        for run in runs {
            assert_eq!(run.await.unwrap().unwrap().value(), Some(&json!("through")));
        }
        assert_eq!(entered.load(Ordering::SeqCst), 3);
    });
}

#[test]
fn run_works_under_any_executor() {
    // No tokio runtime at all: the binding uses tokio's timer, which the provider's reactor serves.
    let slow = binding(|args| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(args.into())
    });
    let request = CodeRunRequest::new("return await tools.slow({ n: 1 })")
        .binding(tools().function("slow", slow));
    let result = futures::executor::block_on(default_runtime().run(request)).unwrap();
    assert_eq!(value(&result), &json!({"n": 1}));
    // A tokio runtime without time or IO: the wall clock still holds.
    let bare = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let spin = CodeRunRequest::new("for (;;) {}")
        .limits(RunLimits { max_wall_ms: Some(100), ..RunLimits::default() });
    let result = bare.block_on(default_runtime().run(spin)).unwrap();
    assert_eq!(
        failure(&result),
        Some(("timeout", "wall-clock ceiling reached (100ms)".to_owned()))
    );
}

#[test]
fn every_global_a_program_starts_with_is_listed_as_shadowed() {
    // A namespace may not hide a global the program needs: the list must cover them all.
    let globals = run("return Object.getOwnPropertyNames(globalThis)", vec![]);
    let globals = value(&globals).as_array().unwrap().clone();
    let missing: Vec<_> = globals
        .iter()
        .filter_map(JsonValue::as_str)
        .filter(|name| {
            !code_runtime::provider::SHADOWED_GLOBALS.contains(name)
                && !code_runtime::provider::RESERVED_BINDING_GLOBALS.contains(name)
                && !code_runtime::provider::PORTABLE_RESERVED_WORDS.contains(name)
        })
        .collect();
    assert!(missing.is_empty(), "globals a namespace could shadow: {missing:?}");
}

#[test]
fn a_binding_that_drops_a_100_000_deep_argument_on_a_2_mib_worker() {
    let small = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_stack_size(2 << 20)
        .enable_all()
        .build()
        .unwrap();
    let ignore = binding(|_args| async { Ok(json!("ignored")) });
    let program = "let deep: unknown = null;\nfor (let i = 0; i < 100_000; i++) deep = [deep];\nreturn await tools.ignore(deep);";
    let request = CodeRunRequest::new(program).binding(tools().function("ignore", ignore));
    let result = small.block_on(async {
        tokio::spawn(async move { default_runtime().run(request).await }).await.unwrap()
    });
    assert_eq!(value(&result.unwrap()), &json!("ignored"));
}

//! The host API as a host meets it, on every provider: per-request limits, the cap on runs in
//! flight, the in-flight call rule, executors that are not tokio, and the globals a namespace
//! may not hide.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use code_runtime::{BindingFunction, CodeRunRequest, JsonValue, RunLimits, binding, json};

use super::{Language, each_provider, failure, tokio, tools, value};

#[test]
fn a_request_tightens_the_provider_limits() {
    each_provider(|provider| {
        let spin = CodeRunRequest::new(provider.program("for (;;) {}", "while True:\n    pass"))
            .limits(RunLimits { compute_ms: Some(100), ..RunLimits::default() });
        assert_eq!(
            failure(&provider.run(spin)),
            Some(("timeout", "compute budget exhausted (100ms busy)".to_owned())),
            "{provider}"
        );
        let chatty =
            CodeRunRequest::new(provider.program("return 'y'.repeat(100)", "return 'y' * 100"))
                .limits(RunLimits { max_output_bytes: Some(40), ..RunLimits::default() });
        assert_eq!(
            failure(&provider.run(chatty)),
            Some(("output-limit", "outer output exceeded 40 bytes".to_owned())),
            "{provider}"
        );
        let looser = CodeRunRequest::new("return 1")
            .limits(RunLimits { compute_ms: Some(60_001), ..RunLimits::default() });
        let error = tokio().block_on(provider.runtime().run(looser)).unwrap_err();
        assert!(error.to_string().contains("request limit compute_ms"), "{provider}: {error}");
    });
}

#[test]
fn a_request_tightens_the_memory_budget_as_each_language_enforces_it() {
    // V8 ends a run past its heap limit; CPython's allocations fail within its address space.
    each_provider(|provider| {
        let hog = provider.program(
            "const a = []; for (;;) a.push(new Array(10_000).fill(1));",
            "try:\n    bytearray(200 * 2**20)\n    return 'allocated'\nexcept MemoryError:\n    return 'refused'",
        );
        let request = CodeRunRequest::new(hog)
            .limits(RunLimits { max_memory_mb: Some(100), ..RunLimits::default() });
        let result = provider.run(request);
        match provider.language {
            Language::TypeScript => assert_eq!(
                failure(&result),
                Some((
                    "worker-exit",
                    "worker error: out of memory: the program exceeded its 100 MB memory budget"
                        .to_owned()
                )),
                "{provider}"
            ),
            Language::Python => assert_eq!(value(&result), &json!("refused"), "{provider}"),
        }
    });
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
    each_provider(|provider| {
        for (program, kind) in [
            (provider.program("tools.hang({}); return 1", "tools.hang({})\nreturn 1"), None),
            (
                provider.program(
                    "tools.hang({}); throw new Error('boom')",
                    "tools.hang({})\nraise RuntimeError('boom')",
                ),
                Some("exception"),
            ),
            (
                provider.program(
                    "tools.hang({}); for (;;) {}",
                    "tools.hang({})\nwhile True:\n    pass",
                ),
                Some("timeout"),
            ),
        ] {
            let started = Arc::new(AtomicUsize::new(0));
            let dropped = Arc::new(AtomicBool::new(false));
            let request = CodeRunRequest::new(program)
                .binding(tools().function("hang", hanging(&started, &dropped)))
                .limits(RunLimits { compute_ms: Some(200), ..RunLimits::default() });
            let result = provider.run(request);
            let ended = result.error().map(|error| error.kind().as_str());
            assert_eq!(ended, kind, "{provider}: {program}");
            assert_eq!(
                started.load(Ordering::SeqCst),
                1,
                "{provider}: {program}: started when made"
            );
            assert!(
                dropped.load(Ordering::SeqCst),
                "{provider}: {program}: cancelled before the end"
            );
        }
    });
}

#[test]
fn runs_beyond_the_cap_wait_for_a_slot() {
    each_provider(|provider| {
        let runtime = provider.with_runs(2);
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
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(entered.load(Ordering::SeqCst), 2, "{provider}: the third run waits");
            gate.add_permits(3);
            for run in runs {
                let result = run.await.unwrap().unwrap();
                assert_eq!(result.value(), Some(&json!("through")), "{provider}");
            }
            assert_eq!(entered.load(Ordering::SeqCst), 3, "{provider}");
        });
    });
}

#[test]
fn run_works_under_any_executor() {
    each_provider(|provider| {
        // No tokio runtime at all: the binding uses tokio's timer, which the provider's reactor
        // serves.
        let slow = binding(|args| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(args.into())
        });
        let request = CodeRunRequest::new("return await tools.slow({ 'n': 1 })")
            .binding(tools().function("slow", slow));
        let result = futures::executor::block_on(provider.runtime().run(request)).unwrap();
        assert_eq!(value(&result), &json!({"n": 1}), "{provider}");
        // A tokio runtime without time or IO: the wall clock still holds.
        let bare = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let spin =
            CodeRunRequest::new(provider.program("for (;;) {}", "import time\ntime.sleep(5)"))
                .limits(RunLimits { max_wall_ms: Some(200), ..RunLimits::default() });
        let result = bare.block_on(provider.runtime().run(spin)).unwrap();
        assert_eq!(
            failure(&result),
            Some(("timeout", "wall-clock ceiling reached (200ms)".to_owned())),
            "{provider}"
        );
    });
}

#[test]
fn every_global_a_program_starts_with_is_listed_as_shadowed() {
    // A namespace may not hide a global the program needs: the list must cover them all.
    each_provider(|provider| {
        let program = provider.program(
            "return Object.getOwnPropertyNames(globalThis)",
            "import builtins\nreturn [name for name in dir(builtins) if not name.startswith('_')]",
        );
        let globals = provider.run(CodeRunRequest::new(program));
        let missing: Vec<_> = value(&globals)
            .as_array()
            .unwrap()
            .iter()
            .filter_map(JsonValue::as_str)
            .filter(|name| {
                !code_runtime::provider::SHADOWED_GLOBALS.contains(name)
                    && !code_runtime::provider::RESERVED_BINDING_GLOBALS.contains(name)
                    && !code_runtime::provider::PORTABLE_RESERVED_WORDS.contains(name)
            })
            .map(str::to_owned)
            .collect();
        assert!(missing.is_empty(), "{provider}: globals a namespace could shadow: {missing:?}");
    });
}

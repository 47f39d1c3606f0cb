//! The host loop of `code_runtime::provider::Host`, driven through a scripted substrate: the check
//! order, the queue, the budgets, binding dispatch and the in-flight call rule, teardown, and
//! independence from the caller's executor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use code_runtime::json;
use code_runtime::provider::{Ending, Event, FunctionId};
use code_runtime::{
    BindingArgs, BindingError, Bindings, CancellationToken, CodeBindingNamespace, CodeRunRequest,
    CodeRuntime, ContractError, FailureKind, JsonValue, Limits, RunLimits, binding,
};

use crate::fake::{FakeProvider, Script};
use crate::{failed, nested_arrays, ok};

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn provider(limits: Limits) -> (Arc<FakeProvider>, tokio::sync::mpsc::UnboundedReceiver<Script>) {
    FakeProvider::new("typescript", limits, 64)
}

fn call(id: u64, function: u32, args: JsonValue) -> Event {
    Event::Call { id, function: FunctionId::new(function), args: BindingArgs::new(args) }
}

fn echo() -> CodeBindingNamespace {
    CodeBindingNamespace::new("tools")
        .function("echo", binding(|args| async move { Ok(args.into_value()) }))
}

#[test]
fn c003_c053_a_cancelled_request_settles_through_the_ledger_without_a_substrate() {
    tokio().block_on(async {
        let signal = CancellationToken::new();
        signal.cancel();
        let (runtime, mut scripts) = provider(Limits::default());
        let result = runtime.run(CodeRunRequest::new("return 1").signal(signal.clone())).await;
        assert_eq!(result.unwrap(), failed(&[], FailureKind::Abort, "cancelled"));
        // A token carries no reason, so the diagnostic is `cancelled` (11 bytes as JSON): at a
        // cap too small for it, the settled request is the output limit.
        let (small, _) = provider(Limits { max_output_bytes: 12, ..Limits::default() });
        let result = small.run(CodeRunRequest::new("return 1").signal(signal.clone())).await;
        assert_eq!(result.unwrap(), failed(&[], FailureKind::OutputLimit, "outer ou"));
        let request = CodeRunRequest::new("return 1")
            .signal(signal)
            .limits(RunLimits { max_output_bytes: Some(12), ..RunLimits::default() });
        let result = runtime.run(request).await;
        assert_eq!(result.unwrap(), failed(&[], FailureKind::OutputLimit, "outer ou"));
        assert!(scripts.try_recv().is_err(), "no substrate was started");
    });
}

#[test]
fn c030_misuse_is_checked_in_order_before_the_cancelled_token() {
    tokio().block_on(async {
        let (runtime, _scripts) = provider(Limits { compute_ms: 100, ..Limits::default() });
        let signal = CancellationToken::new();
        signal.cancel();
        let bad_bindings = CodeRunRequest::new("return 1")
            .binding(CodeBindingNamespace::new("$tools"))
            .signal(signal.clone())
            .limits(RunLimits { compute_ms: Some(101), ..RunLimits::default() });
        let error = runtime.run(bad_bindings).await.unwrap_err();
        assert!(matches!(error, ContractError::UnusableGlobal { .. }), "{error}");
        let bad_limits = CodeRunRequest::new("return 1")
            .signal(signal)
            .limits(RunLimits { compute_ms: Some(101), ..RunLimits::default() });
        let error = runtime.run(bad_limits).await.unwrap_err();
        assert_eq!(
            error,
            ContractError::InvalidRunLimit { key: "compute_ms", value: 101, provider: 100 }
        );
        runtime.dispose().await;
        let error = runtime.run(CodeRunRequest::new("return 1")).await.unwrap_err();
        assert_eq!(error, ContractError::Disposed);
    });
}

#[test]
fn the_substrate_gets_the_tightened_limits_and_a_failed_start_is_a_result() {
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits::default());
        let request = CodeRunRequest::new("return 1")
            .limits(RunLimits { max_memory_mb: Some(64), ..RunLimits::default() });
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(request).await }
        });
        let script = scripts.recv().await.unwrap();
        assert_eq!(script.limits, Limits { max_memory_mb: 64, ..Limits::default() });
        assert_eq!(script.program, "return 1");
        script.events.send(Event::Ended(Ending::Completed(Some(json!(1))))).unwrap();
        assert_eq!(run.await.unwrap().unwrap(), ok(&[], Some(json!(1))));

        let result = runtime.run(CodeRunRequest::new("fail to start")).await.unwrap();
        assert_eq!(
            result,
            failed(&[], FailureKind::WorkerExit, "worker error: no substrate today")
        );
    });
}

#[test]
fn logs_calls_and_the_ending_flow_through_the_loop() {
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits::default());
        let request = CodeRunRequest::new("program").binding(echo());
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(request).await }
        });
        let mut script = scripts.recv().await.unwrap();
        script.events.send(Event::Log("before".into())).unwrap();
        script.events.send(call(7, 0, json!({"q": "x"}))).unwrap();
        assert_eq!(script.settled.recv().await.unwrap(), (7, Ok(json!({"q": "x"}))));
        script.events.send(Event::Log("after".into())).unwrap();
        script.events.send(Event::Ended(Ending::Completed(Some(json!("done"))))).unwrap();
        assert_eq!(run.await.unwrap().unwrap(), ok(&["before", "after"], Some(json!("done"))));
        assert!(script.state.torn_down.load(Ordering::SeqCst));
        assert!(!script.state.stopped.load(Ordering::SeqCst), "it ended by itself");
    });
}

#[test]
fn bindings_checked_once_serve_many_runs_and_a_bad_one_fails_at_startup() {
    // What a host does at startup: its tools, checked once; an input schema that does not
    // compile fails there, not in the first run.
    let broken = CodeBindingNamespace::new("tools").function(
        "bad",
        binding(|args| async move { Ok(args.into()) })
            .input(json!({"type": "object", "pattern": "("}))
            .validate_input(),
    );
    assert!(matches!(Bindings::new([broken]), Err(ContractError::InvalidInputSchema { .. })));
    let bindings = Bindings::new([echo()]).unwrap();
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits::default());
        for n in 0..3u64 {
            let request = CodeRunRequest::with_bindings("program", &bindings);
            let run = tokio::spawn({
                let runtime = runtime.clone();
                async move { runtime.run(request).await }
            });
            let script = scripts.recv().await.unwrap();
            script.events.send(call(n, 0, json!(n))).unwrap();
            script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
            assert_eq!(run.await.unwrap().unwrap(), ok(&[], None));
        }
    });
}

#[test]
fn settlements_are_checked_and_name_the_binding() {
    tokio().block_on(async {
        let tools = CodeBindingNamespace::new("tools")
            .function("nan", binding(|_| async { Ok(json!(f64::NAN)) }))
            .function("big", binding(|_| async { Ok(json!(u64::MAX)) }))
            .function("minus_zero", binding(|_| async { Ok(json!(-0.0)) }))
            .function("panics", binding(|_| async { panic!("boom") }))
            .function(
                "panics_at_once",
                binding(|_| -> std::future::Ready<Result<JsonValue, BindingError>> {
                    panic!("sync boom")
                }),
            )
            .function("data", binding(|_| async { Err(BindingError::new("nope").with_data(json!({"status": 429}))) }))
            .function("lossy_data", binding(|_| async { Err(BindingError::new("nope").with_data(json!([-0.0]))) }));
        let (runtime, mut scripts) = provider(Limits::default());
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p").binding(tools)).await }
        });
        let mut script = scripts.recv().await.unwrap();
        let script = &mut script;
        // serde_json turns NaN into null: nothing reaches the runtime to refuse.
        assert_eq!(answer(script, 0).await, Ok(JsonValue::Null));
        assert_eq!(
            answer(script, 1).await.unwrap_err().message(),
            r#"binding "tools.big" resolved with a value that is not lossless JSON (integer 18446744073709551615 is not exactly representable as a double)"#
        );
        assert_eq!(
            answer(script, 2).await.unwrap_err().message(),
            r#"binding "tools.minus_zero" resolved with a value that is not lossless JSON (number is negative zero)"#
        );
        assert_eq!(answer(script, 3).await.unwrap_err().message(), r#"binding "tools.panics" panicked"#);
        assert_eq!(answer(script, 4).await.unwrap_err().message(), r#"binding "tools.panics_at_once" panicked"#);
        let rejected = answer(script, 5).await.unwrap_err();
        assert_eq!((rejected.message(), rejected.data()), ("nope", Some(&json!({"status": 429}))));
        let rejected = answer(script, 6).await.unwrap_err();
        assert_eq!((rejected.message(), rejected.data()), ("nope", None), "lossy data is dropped");
        // A substrate naming a function it was not given gets an answer, not a panic.
        assert_eq!(answer(script, 99).await.unwrap_err().message(), r##"unknown binding "#99""##);
        script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        assert!(run.await.unwrap().unwrap().is_ok());
    });
}

async fn answer(script: &mut Script, function: u32) -> Result<JsonValue, BindingError> {
    script.events.send(call(u64::from(function), function, JsonValue::Null)).unwrap();
    script.settled.recv().await.unwrap().1
}

#[test]
fn a_binding_that_drops_a_100_000_deep_argument_on_a_2_mib_stack() {
    // The host loop (and with it the closure) runs on a tokio worker with a 2 MiB stack.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_stack_size(2 << 20)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tools = CodeBindingNamespace::new("tools")
            .function("ignore", binding(|_args| async { Ok(json!("ignored")) }));
        let (provider, mut scripts) = provider(Limits::default());
        let run =
            tokio::spawn(
                async move { provider.run(CodeRunRequest::new("p").binding(tools)).await },
            );
        let mut script = scripts.recv().await.unwrap();
        script.events.send(call(1, 0, nested_arrays(100_000))).unwrap();
        assert_eq!(script.settled.recv().await.unwrap(), (1, Ok(json!("ignored"))));
        script.events.send(Event::Ended(Ending::Completed(Some(nested_arrays(100_000))))).unwrap();
        let result = run.await.unwrap().unwrap();
        assert!(result.is_ok());
        drop(result);
    });
}

#[test]
fn the_wall_clock_stops_the_substrate_and_tears_it_down() {
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits { max_wall_ms: 50, ..Limits::default() });
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p")).await }
        });
        let script = scripts.recv().await.unwrap();
        script.events.send(Event::Log("working".into())).unwrap();
        script.state.late_logs.lock().unwrap().push("printed before the stop".into());
        let result = run.await.unwrap().unwrap();
        assert_eq!(
            result,
            failed(
                &["working", "printed before the stop"],
                FailureKind::Timeout,
                "wall-clock ceiling reached (50ms)"
            )
        );
        assert!(script.state.stopped.load(Ordering::SeqCst));
        assert!(script.state.torn_down.load(Ordering::SeqCst));
    });
}

#[test]
fn the_compute_budget_reads_the_substrates_clock() {
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits { compute_ms: 20, ..Limits::default() });
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p")).await }
        });
        let script = scripts.recv().await.unwrap();
        script.state.compute_us.store(5_000, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!run.is_finished(), "5 ms of 20 used");
        script.state.compute_us.store(20_000, Ordering::SeqCst);
        let result = run.await.unwrap().unwrap();
        assert_eq!(
            result,
            failed(&[], FailureKind::Timeout, "compute budget exhausted (20ms busy)")
        );
        assert!(script.state.stopped.load(Ordering::SeqCst));
    });
}

#[test]
fn the_output_budget_stops_the_substrate() {
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits { max_output_bytes: 40, ..Limits::default() });
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p")).await }
        });
        let script = scripts.recv().await.unwrap();
        for _ in 0..10 {
            let _ = script.events.send(Event::Log("0123456789".into()));
        }
        let result = run.await.unwrap().unwrap();
        assert_eq!(result.error().map(|error| error.kind()), Some(FailureKind::OutputLimit));
        assert!(script.state.stopped.load(Ordering::SeqCst));
    });
}

#[test]
fn teardown_refines_an_exit() {
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits::default());
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p")).await }
        });
        let script = scripts.recv().await.unwrap();
        *script.state.exit_code.lock().unwrap() = Some(137);
        drop(script.events); // The substrate went away.
        let result = run.await.unwrap().unwrap();
        assert_eq!(
            result,
            failed(&[], FailureKind::WorkerExit, "worker exited with code 137 before completing")
        );
    });
}

/// A binding that never settles and records when its future is dropped.
fn hanging(started: Arc<AtomicUsize>, dropped: Arc<AtomicBool>) -> CodeBindingNamespace {
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    CodeBindingNamespace::new("tools").function(
        "hang",
        binding(move |_| {
            started.fetch_add(1, Ordering::SeqCst);
            let guard = Guard(dropped.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(JsonValue::Null)
            }
        }),
    )
}

#[test]
fn calls_in_flight_are_cancelled_when_the_run_ends() {
    tokio().block_on(async {
        for ending in [Some(Ending::Completed(Some(json!(1)))), None] {
            let (started, dropped) =
                (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
            let signal = CancellationToken::new();
            let (runtime, mut scripts) = provider(Limits::default());
            let request = CodeRunRequest::new("p")
                .binding(hanging(started.clone(), dropped.clone()))
                .signal(signal.clone());
            let run = tokio::spawn({
                let runtime = runtime.clone();
                async move { runtime.run(request).await }
            });
            let script = scripts.recv().await.unwrap();
            script.events.send(call(1, 0, JsonValue::Null)).unwrap();
            while started.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
            match ending {
                // The program returned without awaiting its call.
                Some(ending) => script.events.send(Event::Ended(ending)).unwrap(),
                None => signal.cancel(),
            }
            let result = run.await.unwrap().unwrap();
            assert!(dropped.load(Ordering::SeqCst), "the call was cancelled before run returned");
            assert_eq!(started.load(Ordering::SeqCst), 1);
            let _ = result;
        }
    });
}

#[test]
fn a_call_ready_at_once_settles_though_the_programs_end_waits_behind_it() {
    tokio().block_on(async {
        // The calls and the end reach the host together (the program made three calls without
        // awaiting them and failed): each call's future is polled before the end is read, so
        // the calls' work runs and they are answered, on every machine and at every timing.
        let settled = Arc::new(AtomicUsize::new(0));
        let counting = CodeBindingNamespace::new("tools").function(
            "count",
            binding({
                let settled = settled.clone();
                move |args| {
                    let settled = settled.clone();
                    async move {
                        settled.fetch_add(1, Ordering::SeqCst);
                        Ok(args.into_value())
                    }
                }
            }),
        );
        let (runtime, mut scripts) = provider(Limits::default());
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p").binding(counting)).await }
        });
        let mut script = scripts.recv().await.unwrap();
        for id in 1..=3 {
            script.events.send(call(id, 0, json!(id))).unwrap();
        }
        script.events.send(Event::Ended(Ending::Threw("TypeError: not awaited".into()))).unwrap();
        let result = run.await.unwrap().unwrap();
        assert_eq!(result.error().map(|error| error.kind()), Some(FailureKind::Exception));
        assert_eq!(settled.load(Ordering::SeqCst), 3, "every call's future ran");
        for id in 1..=3 {
            assert_eq!(script.settled.recv().await.unwrap(), (id, Ok(json!(id))));
        }
    });
}

#[test]
fn a_dropped_run_is_torn_down_and_disposal_waits_for_it() {
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits::default());
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p")).await }
        });
        let script = scripts.recv().await.unwrap();
        run.abort();
        let _ = run.await;
        runtime.dispose().await;
        assert!(script.state.stopped.load(Ordering::SeqCst));
        assert!(script.state.torn_down.load(Ordering::SeqCst), "dispose waited for the teardown");
    });
}

#[test]
fn a_teardowns_cleanup_runs_after_the_result_and_disposal_waits_for_it() {
    tokio().block_on(async {
        let (runtime, mut scripts) = provider(Limits::default());
        let run = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p")).await }
        });
        let script = scripts.recv().await.unwrap();
        let (release, linger) = tokio::sync::oneshot::channel();
        *script.state.linger.lock().unwrap() = Some(linger);
        script.events.send(Event::Ended(Ending::Completed(Some(json!(1))))).unwrap();
        // The result does not wait for the cleanup.
        assert_eq!(run.await.unwrap().unwrap(), ok(&[], Some(json!(1))));
        assert!(!script.state.cleaned_up.load(Ordering::SeqCst));
        let dispose = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.dispose().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!dispose.is_finished(), "disposal waits for the cleanup");
        release.send(()).unwrap();
        dispose.await.unwrap();
        assert!(script.state.cleaned_up.load(Ordering::SeqCst));
    });
}

#[test]
fn disposal_fails_runs_in_flight_and_queued() {
    tokio().block_on(async {
        let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 1);
        let first = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("p")).await }
        });
        let script = scripts.recv().await.unwrap();
        let queued = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(CodeRunRequest::new("q")).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        runtime.dispose().await;
        let disposed = failed(&[], FailureKind::Abort, "runtime disposed");
        assert_eq!(first.await.unwrap().unwrap(), disposed);
        assert_eq!(queued.await.unwrap().unwrap(), disposed);
        assert!(script.state.torn_down.load(Ordering::SeqCst));
        assert!(scripts.try_recv().is_err(), "the queued run never started");
    });
}

#[test]
fn runs_beyond_the_cap_wait_and_obey_their_token_and_wall_clock() {
    tokio().block_on(async {
        let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 2);
        let spawn = |request: CodeRunRequest| {
            let runtime = runtime.clone();
            tokio::spawn(async move { runtime.run(request).await })
        };
        let first = spawn(CodeRunRequest::new("1"));
        let second = spawn(CodeRunRequest::new("2"));
        // The two runs start in whichever order the runtime's workers reach them.
        let (one, two) = {
            let a = scripts.recv().await.unwrap();
            let b = scripts.recv().await.unwrap();
            if a.program == "1" { (a, b) } else { (b, a) }
        };
        assert_eq!((one.program.as_str(), two.program.as_str()), ("1", "2"));
        let signal = CancellationToken::new();
        let cancelled = spawn(CodeRunRequest::new("cancelled").signal(signal.clone()));
        let timed_out = spawn(
            CodeRunRequest::new("timed out")
                .limits(RunLimits { max_wall_ms: Some(30), ..RunLimits::default() }),
        );
        let third = spawn(CodeRunRequest::new("3"));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(scripts.try_recv().is_err(), "two slots, both taken");
        signal.cancel();
        assert_eq!(cancelled.await.unwrap().unwrap(), failed(&[], FailureKind::Abort, "cancelled"));
        assert_eq!(
            timed_out.await.unwrap().unwrap(),
            failed(&[], FailureKind::Timeout, "wall-clock ceiling reached (30ms)")
        );
        assert!(scripts.try_recv().is_err(), "queued runs that ended took no slot");
        one.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        assert!(first.await.unwrap().unwrap().is_ok());
        let three = scripts.recv().await.unwrap();
        assert_eq!(three.program, "3", "the next queued run starts when a slot frees up");
        two.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        three.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        assert!(second.await.unwrap().unwrap().is_ok());
        assert!(third.await.unwrap().unwrap().is_ok());
    });
}

#[test]
fn run_needs_no_tokio_runtime_from_its_caller() {
    // `futures::executor::block_on` has no tokio context at all; the binding uses tokio's timer.
    let tools = CodeBindingNamespace::new("tools").function(
        "slow",
        binding(|args| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(args.into_value())
        }),
    );
    let (runtime, mut scripts) =
        FakeProvider::new("typescript", Limits { max_wall_ms: 5_000, ..Limits::default() }, 4);
    let player = std::thread::spawn(move || {
        let mut script = scripts.blocking_recv().unwrap();
        script.events.send(call(1, 0, json!(41))).unwrap();
        let answer = script.settled.blocking_recv().unwrap();
        script.events.send(Event::Ended(Ending::Completed(answer.1.ok()))).unwrap();
    });
    let result = futures::executor::block_on(runtime.run(CodeRunRequest::new("p").binding(tools)));
    player.join().unwrap();
    assert_eq!(result.unwrap(), ok(&[], Some(json!(41))));

    // A tokio runtime without its time and IO drivers: the wall clock still fires.
    let bare = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (runtime, _scripts) =
        FakeProvider::new("typescript", Limits { max_wall_ms: 20, ..Limits::default() }, 4);
    let result = bare.block_on(runtime.run(CodeRunRequest::new("p")));
    assert_eq!(
        result.unwrap(),
        failed(&[], FailureKind::Timeout, "wall-clock ceiling reached (20ms)")
    );
}

#[test]
fn a_run_survives_the_shutdown_of_the_runtime_that_polled_it() {
    let (runtime, mut scripts) = provider(Limits::default());
    let host_runtime = tokio();
    host_runtime.spawn({
        let runtime = runtime.clone();
        async move { runtime.run(CodeRunRequest::new("p")).await }
    });
    let script = scripts.blocking_recv().unwrap();
    host_runtime.shutdown_timeout(Duration::from_secs(1));
    // The run future was dropped with its runtime: its teardown ran on the reactor.
    futures::executor::block_on(runtime.dispose());
    assert!(script.state.stopped.load(Ordering::SeqCst));
    assert!(script.state.torn_down.load(Ordering::SeqCst));
}

//! [`Context`]: one provider per language, lookup, and disposal to quiescence (docs/reference.md
//! C004, C005, C031).

use std::sync::Arc;

use code_runtime::provider::{Ending, Event, RunGate};
use code_runtime::{
    CodeRunRequest, CodeRuntime, Context, ContextError, ContractError, Isolation, Language, Limits,
};

use crate::fake::FakeProvider;

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

#[test]
fn c005_one_provider_per_language() {
    let context = Context::new();
    assert_eq!(
        context.code_runtime("typescript").err(),
        Some(ContextError::NotRegistered { language: "typescript".into() })
    );
    let (typescript, _) = FakeProvider::new("typescript", Limits::default(), 1);
    let (python, _) = FakeProvider::new("python", Limits::default(), 1);
    context.provide_code_runtime(typescript).unwrap();
    context.provide_code_runtime(python).unwrap();
    let (again, _) = FakeProvider::new("python", Limits::default(), 1);
    let error = context.provide_code_runtime(again).unwrap_err();
    assert_eq!(error, ContextError::AlreadyRegistered { language: "python".into() });
    assert_eq!(
        error.to_string(),
        r#"code-runtime: a "python" code runtime is already registered in this context"#
    );
    assert_eq!(context.languages(), ["python", "typescript"]);
    let runtime = context.code_runtime("python").unwrap();
    assert_eq!((runtime.language(), runtime.isolation()), (Language::Python, Isolation::Thread));
    // By the typed language as by its name; a runtime's name compares equal to its language.
    let typed = context.code_runtime(Language::Python).unwrap();
    assert!(Arc::ptr_eq(&typed, &runtime));
    assert!(typed.language() == Language::Python);
    assert_eq!(
        context.code_runtime("cobol").err(),
        Some(ContextError::NotRegistered { language: "cobol".into() })
    );
    assert_eq!(
        format!("{context:?}"),
        r#"Context { code_runtimes: ["python (worker-thread)", "typescript (worker-thread)"], .. }"#
    );
}

#[test]
fn c004_c031_disposal_removes_and_disposes_every_provider() {
    current_thread().block_on(async {
        let (typescript, _) = FakeProvider::new("typescript", Limits::default(), 1);
        let (python, _) = FakeProvider::new("python", Limits::default(), 1);
        let context = Context::new();
        context.provide_code_runtime(typescript.clone()).unwrap();
        context.provide_code_runtime(python.clone()).unwrap();
        let held = context.code_runtime("typescript").unwrap();

        context.dispose().await;
        assert_eq!(context.code_runtime("typescript").err(), Some(ContextError::Disposed));
        assert!(context.languages().is_empty());
        let (late, _) = FakeProvider::new("python", Limits::default(), 1);
        assert_eq!(context.provide_code_runtime(late).err(), Some(ContextError::Disposed));

        // C031: a handle obtained earlier is disposed too; `run` is misuse now.
        let error = held.run(CodeRunRequest::new("return 1")).await.unwrap_err();
        assert_eq!(error, ContractError::Disposed);
        assert_eq!(error.to_string(), "code-runtime: run() after disposal");
        assert_eq!(
            python.run(CodeRunRequest::new("return 1")).await.err(),
            Some(ContractError::Disposed)
        );
        context.dispose().await; // Idempotent.
    });
}

#[test]
fn disposal_waits_for_the_runs_of_every_provider() {
    let tokio =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    tokio.block_on(async {
        let (typescript, mut scripts) = FakeProvider::new("typescript", Limits::default(), 1);
        let context = Arc::new(Context::new());
        context.provide_code_runtime(typescript.clone()).unwrap();
        let run = tokio::spawn(async move { typescript.run(CodeRunRequest::new("p")).await });
        let script = scripts.recv().await.unwrap();
        let disposing = tokio::spawn({
            let context = context.clone();
            async move { context.dispose().await }
        });
        let result = run.await.unwrap().unwrap();
        assert_eq!(result.error().map(|error| error.message()), Some("runtime disposed"));
        disposing.await.unwrap();
        assert!(script.state.torn_down.load(std::sync::atomic::Ordering::SeqCst));
        let _ = script.events.send(Event::Ended(Ending::Completed(None)));
    });
}

#[test]
fn run_gate_waits_for_every_permit() {
    current_thread().block_on(async {
        let gate = Arc::new(RunGate::new(4).unwrap());
        let permit = gate.enter().expect("open");
        assert!(!gate.disposed().is_cancelled());
        let disposing = tokio::spawn({
            let gate = gate.clone();
            async move { gate.dispose().await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(gate.disposed().is_cancelled(), "runs in flight are told at once");
        assert!(!disposing.is_finished(), "a permit is still held");
        assert_eq!(gate.enter().err(), Some(ContractError::Disposed));
        drop(permit);
        disposing.await.unwrap();
        gate.dispose().await; // Idempotent.
    });
}

/// A drain (the gateway's SIGTERM) closes the gate as disposal does, but lets the runs in
/// flight finish: runs still queued for a slot are refused, and `drained` waits for the rest.
#[test]
fn a_drained_gate_refuses_new_and_queued_runs_and_waits_for_the_running_ones() {
    current_thread().block_on(async {
        let gate = RunGate::new(1).unwrap();
        let mut first = gate.enter().expect("open");
        assert!(gate.slot(&mut first).await && first.has_slot());
        // The second waits for the first's slot.
        let mut second = gate.enter().expect("open");
        {
            let queued = gate.slot(&mut second);
            tokio::pin!(queued);
            assert!(futures::poll!(queued.as_mut()).is_pending());
            assert_eq!(gate.admitted(), 2);
            gate.drain();
            assert!(!queued.await, "queued when the drain began: refused");
        }
        drop(second);
        assert!(gate.is_closed());
        assert_eq!(gate.enter().err(), Some(ContractError::Disposed));
        assert!(!gate.disposed().is_cancelled(), "a drain stops no run");
        // The running one is waited for.
        let drained = gate.drained();
        tokio::pin!(drained);
        assert!(futures::poll!(drained.as_mut()).is_pending());
        assert_eq!(gate.admitted(), 1);
        drop(first);
        drained.await;
        assert_eq!(gate.admitted(), 0);
        gate.drain(); // Idempotent.
    });
}

#[test]
fn an_unbounded_gate_gives_every_run_its_slot_at_once() {
    current_thread().block_on(async {
        let gate = RunGate::unbounded();
        let mut permits: Vec<_> = (0..1000).map(|_| gate.enter().expect("open")).collect();
        for permit in &mut permits {
            assert!(gate.slot(permit).await);
        }
        assert_eq!(gate.admitted(), 1000);
        gate.drain();
        drop(permits);
        gate.drained().await;
    });
}

#[test]
fn a_gate_needs_at_least_one_slot() {
    assert_eq!(
        RunGate::new(0).unwrap_err().to_string(),
        "code-runtime: config.max_concurrent_runs must be a positive number, got 0"
    );
}

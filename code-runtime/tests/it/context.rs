//! [`Context`]: registration, lookup and disposal to quiescence (REFERENCE.md C004, C005, C031).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use code_runtime::{
    CodeRunRequest, CodeRunResult, CodeRuntime, Context, ContractError, Limits, Outcome,
    async_trait,
};
use tokio::sync::Notify;

/// A provider whose only substrate is a gate: `dispose` returns once the test opens it. It counts
/// its disposals and refuses runs afterwards, as every provider must.
#[derive(Default)]
struct Gated {
    gate: Notify,
    disposals: AtomicUsize,
}

#[async_trait]
impl CodeRuntime for Gated {
    fn language(&self) -> &str {
        "test"
    }

    fn isolation(&self) -> &str {
        "none"
    }

    async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError> {
        if self.disposals.load(Ordering::SeqCst) > 0 {
            return Err(ContractError::Disposed);
        }
        let limits = Limits::default();
        if let Some(settled) = request.preflight(&limits)? {
            return Ok(settled);
        }
        Ok(limits.ledger().settle(Outcome::Completed(None)))
    }

    async fn dispose(&self) {
        self.disposals.fetch_add(1, Ordering::SeqCst);
        self.gate.notified().await;
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

#[test]
fn c005_one_provider_per_context() {
    let context = Context::new();
    assert_eq!(context.code_runtime().err(), Some(ContractError::NotRegistered));
    context.provide_code_runtime(Arc::new(Gated::default())).unwrap();
    let error = context.provide_code_runtime(Arc::new(Gated::default())).unwrap_err();
    assert_eq!(error, ContractError::AlreadyRegistered);
    assert!(error.to_string().contains("registered"), "{error}");
    let runtime = context.code_runtime().unwrap();
    assert_eq!((runtime.language(), runtime.isolation()), ("test", "none"));
    assert_eq!(format!("{context:?}"), r#"Context { code_runtime: "test (none)", .. }"#);
}

#[test]
fn c004_disposal_removes_the_service() {
    current_thread().block_on(async {
        let provider = Arc::new(Gated::default());
        let context = Context::new();
        context.provide_code_runtime(provider.clone()).unwrap();
        let held = context.code_runtime().unwrap();

        provider.gate.notify_one();
        context.dispose().await;
        assert_eq!(provider.disposals.load(Ordering::SeqCst), 1);
        assert_eq!(context.code_runtime().err(), Some(ContractError::ContextDisposed));
        assert_eq!(
            context.provide_code_runtime(Arc::new(Gated::default())).err(),
            Some(ContractError::ContextDisposed)
        );

        // C031: a handle obtained earlier is disposed too; `run` is misuse now.
        let error = held.run(CodeRunRequest::new("return 1")).await.unwrap_err();
        assert!(error.to_string().contains("after disposal"), "{error}");

        context.dispose().await;
        assert_eq!(provider.disposals.load(Ordering::SeqCst), 1, "disposal is idempotent");
    });
}

#[test]
fn concurrent_disposals_all_wait_for_quiescence() {
    current_thread().block_on(async {
        let provider = Arc::new(Gated::default());
        let context = Arc::new(Context::new());
        context.provide_code_runtime(provider.clone()).unwrap();
        let first = tokio::spawn({
            let context = context.clone();
            async move { context.dispose().await }
        });
        let second = tokio::spawn({
            let context = context.clone();
            async move { context.dispose().await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !first.is_finished() && !second.is_finished(),
            "the provider has not reached quiescence"
        );
        assert_eq!(
            context.code_runtime().err(),
            Some(ContractError::ContextDisposed),
            "gone at first poll"
        );

        provider.gate.notify_one();
        first.await.unwrap();
        second.await.unwrap();
        assert_eq!(provider.disposals.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_provider_is_usable_as_a_trait_object() {
    current_thread().block_on(async {
        let runtime: Arc<dyn CodeRuntime> = Arc::new(Gated::default());
        let result = runtime.run(CodeRunRequest::new("return")).await.unwrap();
        assert_eq!(result.to_json(), r#"{"logs":[]}"#);
    });
}

#[test]
fn run_gate_waits_for_every_permit() {
    current_thread().block_on(async {
        let gate = Arc::new(code_runtime::RunGate::new());
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

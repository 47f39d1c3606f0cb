//! The [`CodeRuntime`] trait: the service every provider implements.

use std::sync::Arc;

use async_trait::async_trait;

use crate::checkpoint::{Checkpoint, Decisions};
use crate::error::ContractError;
use crate::isolation::Isolation;
use crate::language::Language;
use crate::limits::Limits;
use crate::request::{Approvals, CodeRunRequest};
use crate::result::CodeRunResult;

/// A service that runs one program per call, in isolation, against host bindings.
///
/// Object-safe (through `async-trait`), so hosts hold an `Arc<dyn CodeRuntime>` and consumers never
/// name a provider. Many runs may be in flight on one runtime at once; each gets a fresh substrate
/// (an isolate or a child process) that is gone by the time its run resolves. A provider admits a
/// bounded number of runs at a time and queues the rest.
///
/// # Executors
///
/// `run` needs no particular executor: the providers of this workspace keep their timers, sockets
/// and child processes on a reactor thread of their own, so `run` works inside any tokio runtime
/// (with or without its time and IO drivers) and under `futures::executor::block_on`. The binding
/// closures are polled by the `run` future itself, in the caller's context; when that context has
/// no tokio runtime, they are polled inside the provider's, so tokio timers and IO work in them.
#[async_trait]
pub trait CodeRuntime: Send + Sync {
    /// The source language `run` expects ([`Language::as_str`] names it, and it compares equal
    /// to its name). A consumer that renders language-specific instructions matches on it.
    fn language(&self) -> Language;

    /// Where each run's program runs ([`Isolation::as_str`] labels it: `"worker-thread"` or
    /// `"process"`). A diagnostic label, not a security claim.
    fn isolation(&self) -> Isolation;

    /// The budgets of every run; a request may tighten them
    /// ([`CodeRunRequest::limits`]), never loosen them.
    fn limits(&self) -> &Limits;

    /// Runs one program to its end and reports what it printed and returned, or why it failed.
    ///
    /// Everything a program does, including failing to parse, throwing, exhausting a budget, being
    /// cancelled or killing its substrate, resolves as `Ok` with
    /// [`CodeRunResult::error`] set. The wall clock starts when `run` is called, so time spent
    /// waiting for a free slot counts; a queued run still obeys cancellation and disposal.
    ///
    /// # Errors
    ///
    /// Only contract misuse: a call after [`dispose`](CodeRuntime::dispose), an invalid binding
    /// declaration, or a per-request limit above the provider's (checked in that order, before the
    /// cancellation token).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the program and tears its substrate down (the isolate thread is
    /// joined, the child process killed and reaped) on the provider's reactor, without blocking the
    /// dropping thread; binding calls in flight are dropped with it. [`dispose`](CodeRuntime::dispose)
    /// waits for that teardown.
    async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError>;

    /// Continues a paused run ([`CodeRunResult::paused`]): `run` of
    /// `request` made a resumption of `checkpoint` with `decisions`
    /// ([`CodeRunRequest::resuming`]). `request` brings what the checkpoint does not hold: the
    /// bindings, the values, the limits, the events, and the [`Approvals`](crate::Approvals)
    /// whose key signed the checkpoint; its program, if any, must be the checkpoint's.
    ///
    /// # Errors
    ///
    /// As [`run`](CodeRuntime::run), and [`ContractError::Checkpoint`] for a checkpoint that does
    /// not verify under the key, is of another language, program or bindings, or decisions on
    /// calls that are not pending; nothing runs then.
    async fn resume(
        &self,
        checkpoint: Checkpoint,
        decisions: Decisions,
        request: CodeRunRequest,
    ) -> Result<CodeRunResult, ContractError> {
        let resume = CodeRunRequest::resuming(checkpoint, decisions).resume;
        self.run(CodeRunRequest { resume, ..request }).await
    }

    /// Disposes the runtime: in-flight runs resolve as `abort` (`runtime disposed`), later calls of
    /// `run` fail with [`ContractError::Disposed`], and the future completes only once every
    /// substrate is gone. Idempotent.
    async fn dispose(&self);
}

/// A runtime whose runs get the host's [`Approvals`](crate::Approvals) when their request brings
/// none: the approver on the provider, for hosts whose requests are made in many places.
///
/// ```
/// # fn wrap(runtime: std::sync::Arc<dyn code_runtime::CodeRuntime>) {
/// use code_runtime::{Approvals, Decision, WithApprovals};
///
/// let guarded = WithApprovals::new(runtime, Approvals::new(Decision::deny("ask a person first")));
/// # let _ = guarded;
/// # }
/// ```
pub struct WithApprovals {
    runtime: Arc<dyn CodeRuntime>,
    approvals: Approvals,
}

impl WithApprovals {
    /// `runtime`, its requests without approvals given `approvals`.
    pub fn new(runtime: Arc<dyn CodeRuntime>, approvals: Approvals) -> Self {
        Self { runtime, approvals }
    }
}

impl std::fmt::Debug for WithApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithApprovals")
            .field("language", &self.runtime.language())
            .field("approvals", &self.approvals)
            .finish()
    }
}

#[async_trait]
impl CodeRuntime for WithApprovals {
    fn language(&self) -> Language {
        self.runtime.language()
    }

    fn isolation(&self) -> Isolation {
        self.runtime.isolation()
    }

    fn limits(&self) -> &Limits {
        self.runtime.limits()
    }

    async fn run(&self, mut request: CodeRunRequest) -> Result<CodeRunResult, ContractError> {
        if request.approvals.is_none() {
            request.approvals = Some(self.approvals.clone());
        }
        self.runtime.run(request).await
    }

    async fn dispose(&self) {
        self.runtime.dispose().await;
    }
}

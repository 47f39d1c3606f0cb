//! The [`CodeRuntime`] trait: the service every provider implements.

use async_trait::async_trait;

use crate::error::ContractError;
use crate::request::CodeRunRequest;
use crate::result::CodeRunResult;

/// A service that runs one program at a time per call, in isolation, against host bindings.
///
/// Object-safe (through `async-trait`), so hosts hold an `Arc<dyn CodeRuntime>` and consumers never
/// name a provider. Many runs may be in flight on one runtime at once; each gets a fresh substrate
/// (an isolate or a child process) that is gone by the time its run resolves.
#[async_trait]
pub trait CodeRuntime: Send + Sync {
    /// The source language `run` expects, lowercase: `"typescript"` or `"python"`. A consumer that
    /// renders language-specific instructions switches on it and fails loudly on one it does not
    /// know.
    fn language(&self) -> &str;

    /// The execution substrate, lowercase: `"worker-thread"` or `"process"`. A diagnostic label, not
    /// a security claim.
    fn isolation(&self) -> &str;

    /// Runs one program to its end and reports what it printed and returned, or why it failed.
    ///
    /// Everything a program does, including failing to parse, throwing, exhausting a budget, being
    /// cancelled or killing its substrate, resolves as `Ok` with
    /// [`CodeRunResult::error`] set.
    ///
    /// # Errors
    ///
    /// Only contract misuse: an invalid binding declaration (checked before the cancellation
    /// token), or a call after [`dispose`](CodeRuntime::dispose).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the program and tears its substrate down (the isolate thread is
    /// joined, the child process killed and reaped) without blocking the dropping thread on it.
    async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError>;

    /// Disposes the runtime: in-flight runs resolve as `abort` (`runtime disposed`), later calls of
    /// `run` fail with [`ContractError::Disposed`], and the future completes only once every
    /// substrate is gone. Idempotent.
    async fn dispose(&self);
}

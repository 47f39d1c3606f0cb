//! [`CodeRunRequest`]: one program, its bindings, and an optional cancellation token.

use tokio_util::sync::CancellationToken;

use crate::binding::CodeBindingNamespace;
use crate::error::ContractError;
use crate::ledger::Outcome;
use crate::limits::Limits;
use crate::result::{CodeRunFailure, CodeRunResult};
use crate::validation::validate_bindings;

/// One program to run, the bindings it may call, and a token that aborts it.
///
/// The request carries no budgets: those are validated provider configuration ([`Limits`]).
#[derive(Clone, Debug, Default)]
pub struct CodeRunRequest {
    /// The program, in the provider's language, executed as the body of an async function:
    /// top-level `await` and `return` work, and the returned value is the completion.
    pub program: String,
    /// The namespaces the program sees, each as one object named by its `global`.
    pub bindings: Vec<CodeBindingNamespace>,
    /// Cancelling this token stops the program promptly, even mid-loop, and the run resolves as
    /// `abort` (`cancelled`). Binding calls already in flight are not cancelled by the runtime; their
    /// late results are dropped.
    pub signal: Option<CancellationToken>,
}

impl CodeRunRequest {
    /// A request for `program` with no bindings and no signal.
    pub fn new(program: impl Into<String>) -> Self {
        Self { program: program.into(), ..Self::default() }
    }

    /// Adds a namespace.
    pub fn binding(mut self, namespace: CodeBindingNamespace) -> Self {
        self.bindings.push(namespace);
        self
    }

    /// Sets the cancellation token.
    pub fn signal(mut self, signal: CancellationToken) -> Self {
        self.signal = Some(signal);
        self
    }

    /// Completes when the request's token is cancelled; never, without a token.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: nothing is lost by dropping it and asking again.
    pub async fn cancelled(&self) {
        match &self.signal {
            Some(signal) => signal.cancelled().await,
            None => std::future::pending().await,
        }
    }

    /// Whether the request's token has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.signal.as_ref().is_some_and(CancellationToken::is_cancelled)
    }

    /// The checks every provider runs first, after its own "disposed?" check, in the order
    /// REFERENCE.md §1.6 fixes: validate the bindings, then settle an already-cancelled request
    /// without starting anything.
    ///
    /// Returns `Ok(None)` when the run should proceed, `Ok(Some(result))` when it is already settled
    /// (an `abort` result, passed through the output ledger with empty logs).
    ///
    /// # Errors
    ///
    /// An invalid binding declaration, even when the token is cancelled too.
    pub fn preflight(&self, limits: &Limits) -> Result<Option<CodeRunResult>, ContractError> {
        validate_bindings(&self.bindings)?;
        if self.is_cancelled() {
            return Ok(Some(limits.ledger().settle(Outcome::Failed(CodeRunFailure::cancelled()))));
        }
        Ok(None)
    }
}

//! Approvals: the host decides, call by call, whether a program may make the calls it marked
//! ([`BindingFunction::approval`](crate::BindingFunction::approval)): an [`Approver`] answers
//! each [`ApprovalRequest`] with a [`Decision`], within the request's [`Approvals`](crate::Approvals).
//!
//! Code mode takes the human out of the loop: a user who approved one `run_code` approved every
//! call inside it. A marked call waits, inside the program, for the host's decision: allowed, it
//! runs; denied, it rejects with the namespace's error class and `denied: <reason>` (the program
//! may catch it); paused, the run ends with [`CodeRunResult::paused`](crate::CodeRunResult::paused)
//! and a signed [`Checkpoint`](crate::Checkpoint) that [`resume`](crate::CodeRuntime::resume)
//! continues exactly, here or on any machine holding the key.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;

use crate::json::JsonValue;

mod summary;

pub(crate) use summary::summarize;

/// When the calls of a function need the host's approval.
#[derive(Clone, Debug, PartialEq)]
pub enum ApprovalRule {
    /// Every call.
    Always,
    /// The calls whose argument matches this JSON Schema (`{"properties": {"force": {"const":
    /// true}}, "required": ["force"]}`). An argument the check cannot judge (nested more than 128
    /// levels, say) needs approval too.
    When(JsonValue),
}

/// The host's answer to one [`ApprovalRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The call runs.
    Allow,
    /// The call rejects with the namespace's error class and the message `denied: <reason>`,
    /// which the program may catch; the host function is not called.
    Deny(String),
    /// The run ends now as paused, with a checkpoint to resume it from once someone decides
    /// (see [`Approvals::checkpoint_key`](crate::Approvals::checkpoint_key)). A run that cannot pause (no key) denies instead.
    Pause,
}

impl Decision {
    /// A denial with `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Deny(reason.into())
    }

    /// `"allow"`, `"deny"` or `"pause"`: how events and records spell it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny(_) => "deny",
            Decision::Pause => "pause",
        }
    }
}

/// A call waiting for the host's decision.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The namespace's `global`.
    pub namespace: String,
    /// The function's name.
    pub function: String,
    /// The argument (JSON `null` when the program passed none).
    pub args: JsonValue,
    /// One line for a person: `github.delete_repo({"name":"infra"})`. It shows every key of
    /// the argument at every depth; a string or key over 256 bytes keeps its first 256 and is
    /// followed by `…(N bytes in all)`, an array over 32 items its first 32 and
    /// `…(N more items)`. Controls, DEL, line and paragraph separators, bidirectional overrides
    /// and invisible format characters are escaped (`\u202e`), so the line is safe to print on
    /// a terminal and hides nothing the call carries.
    pub summary: String,
    /// Where the program is: this is its `call`th call (counting from 1), the number a paused
    /// run's pending calls carry and [`Decisions`](crate::Decisions) name.
    pub call: u64,
    /// The run that made the call: a number no other run of this process has
    /// ([`BindingArgs::run`](crate::BindingArgs::run)), for what a host keeps per run.
    pub run: u64,
}

/// How long a decision may take before the call is denied (`no decision`): ten minutes.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);

/// Decides the calls that need approval. Waiting for it is charged to neither the run's wall
/// clock nor its compute budget; [`Approvals::timeout`](crate::Approvals::timeout) bounds it.
///
/// A closure is one: [`approver_fn`]. So is a [`Decision`], which decides every call the same.
#[async_trait]
pub trait Approver: Send + Sync {
    /// The decision on `request`.
    async fn decide(&self, request: &ApprovalRequest) -> Decision;

    /// Who decides, as events and records name them (`"terminal"`, `"client"`).
    fn name(&self) -> &str {
        "approver"
    }
}

#[async_trait]
impl Approver for Decision {
    async fn decide(&self, _request: &ApprovalRequest) -> Decision {
        self.clone()
    }

    fn name(&self) -> &str {
        "policy"
    }
}

/// An [`Approver`] made of an async closure.
///
/// ```
/// use code_runtime::{approver_fn, Approvals, Decision};
///
/// let approvals = Approvals::new(approver_fn(|request| {
///     let destructive = request.function.starts_with("delete");
///     async move { if destructive { Decision::deny("not today") } else { Decision::Allow } }
/// }));
/// # let _ = approvals;
/// ```
pub fn approver_fn<F, Fut>(decide: F) -> impl Approver
where
    F: Fn(&ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Decision> + Send + 'static,
{
    ApproverFn(decide)
}

struct ApproverFn<F>(F);

#[async_trait]
impl<F, Fut> Approver for ApproverFn<F>
where
    F: Fn(&ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Decision> + Send + 'static,
{
    async fn decide(&self, request: &ApprovalRequest) -> Decision {
        (self.0)(request).await
    }
}

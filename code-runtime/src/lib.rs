//! The service definition of code-runtime: run one model-written program in isolation against
//! host-provided async functions, and get back only what it printed and returned.
//!
//! This crate is what consumers depend on. It names no engine: the providers
//! (`code-runtime-worker-thread` for TypeScript on V8, `code-runtime-python` for CPython) implement
//! [`CodeRuntime`], and a host registers them in a [`Context`] at startup. The one thread it
//! starts is the reactor, on a provider's first use: a tokio runtime of its own that owns every
//! run's timers, sockets and teardown, so a run works under any executor
//! ([`provider::reactor`], which a host may configure before and shut down after its runs).
//!
//! ## Core concepts
//!
//! - [`CodeRuntime`]: the service. One per language per host, shared as `Arc<dyn CodeRuntime>`,
//!   alive from startup to [`CodeRuntime::dispose`]. Holds validated configuration ([`Limits`])
//!   and nothing per run; creating one costs what the provider's start-up costs (initialising V8
//!   once, resolving the interpreter once).
//! - [`CodeRunRequest`]: one program plus its [`CodeBindingNamespace`]s, an optional cancellation
//!   token and optional [`RunLimits`] that tighten the provider's. Lives for one call of
//!   [`CodeRuntime::run`]; the program is the body of an async function, so top-level `await` and
//!   `return` work.
//! - [`BindingFunction`]: a host async closure, [`BindingArgs`] in, `Result<JsonValue,
//!   BindingError>` out, built with [`binding`] or [`binding_with`]. Cloned into each run (an
//!   `Arc` clone); each program call costs one closure call plus a JSON conversion on each side.
//! - [`CodeRunResult`]: what came back: `logs`, then either `value` or `error`
//!   ([`CodeRunFailure`] with one of six [`FailureKind`]s). Everything a program does, including
//!   crashing its substrate, is a result; only misuse of the contract is a [`ContractError`].
//! - [`JsonValue`]: the only thing that crosses between a program and the host, checked *lossless*
//!   by the rules of [`json`](mod@json) (finite, no `-0`, integers exact as a double, valid Unicode, any
//!   depth).
//! - [`Context`]: the registry a host builds at startup, one provider per language.
//! - [`Approvals`]: calls a function marks ([`BindingFunction::approval`]) wait for the host's
//!   [`Decision`]: allowed, denied (the program catches it), or paused, which ends the run with a
//!   signed [`Checkpoint`] that [`CodeRuntime::resume`] continues exactly.
//!
//! Provider crates implement [`CodeRuntime`] on top of [`provider`], the SPI: one host loop, the
//! output ledger every result is built by, the disposal rule, and the message catalogue.
//!
//! ## Example: a host with both languages
//!
//! ```no_run
//! # async fn host() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use code_runtime::{binding, CodeBindingNamespace, CodeRunRequest, Context};
//! use code_runtime::json;
//!
//! let context = Context::new();
//! // At startup, e.g. with the workspace's two providers:
//! // context.provide_code_runtime(Arc::new(WorkerThreadCodeRuntime::new(Default::default())?))?;
//! // context.provide_code_runtime(Arc::new(PythonCodeRuntime::start(Default::default()).await?))?;
//!
//! let tools = CodeBindingNamespace::new("tools")
//!     .function("search", binding(|args| async move { Ok(json!({ "hits": [args["q"]] })) }))
//!     .error_class("ToolCallError", "toolName");
//! // Per model turn: the program the model wrote, in the language it was asked for.
//! let runtime = context.code_runtime("typescript")?;
//! let request = CodeRunRequest::new("const r = await tools.search({ q: 'rust' }); return r.hits;")
//!     .binding(tools);
//! let result = runtime.run(request).await?;
//! assert_eq!(result.to_json(), r#"{"logs":[],"value":["rust"]}"#);
//! context.dispose().await;
//! # Ok(()) }
//! ```
//!
//! ## JSON
//!
//! [`JsonValue`] is this crate's own owned JSON type (insertion-ordered objects), not
//! `serde_json::Value`: a program can hand the host a value nested 1 000 000 levels deep, and
//! `serde_json::Value`'s `Drop`, `Clone` and `Serialize` recurse once per level. Ours never do, so
//! no host path can forget the rule. Build values with [`json!`] (`serde_json::json!`'s syntax),
//! read typed data with [`json::from_value`], and cross to `serde_json::Value` explicitly with
//! `JsonValue::from` and [`JsonValue::to_serde_json`] (see [`json`](mod@json)).
#![warn(missing_docs, missing_debug_implementations)]

mod approval;
mod binding;
mod bindings;
mod checkpoint;
mod context;
mod declaration;
mod error;
mod event;
mod input_schema;
mod isolation;
pub use code_runtime_json as json;
/// Builds a [`JsonValue`] (see [`json`](mod@json)).
pub use code_runtime_json::json;
mod language;
mod limits;
mod memory;
mod program_text;
pub mod provider;
#[doc(hidden)]
pub mod reactor;
mod request;
mod result;
mod runtime;
mod session;
mod validation;

pub use crate::approval::{
    ApprovalRequest, ApprovalRule, Approver, DEFAULT_APPROVAL_TIMEOUT, Decision, approver_fn,
};
pub use crate::binding::{
    BindingArgs, BindingError, BindingFunction, CodeBindingErrorClass, CodeBindingNamespace,
    binding, binding_with,
};
pub use crate::bindings::Bindings;
pub use crate::checkpoint::{
    Checkpoint, CheckpointError, CheckpointKey, Decisions, MAX_CHECKPOINT_BYTES, Paused,
    PendingCall, SpentCheckpoints, spent_in_process,
};
pub use crate::context::Context;
pub use crate::declaration::{describe, describe_request};
pub use crate::error::{ConfigError, ContextError, ContractError};
pub use crate::event::{EventSink, RunEvent};
pub use crate::isolation::{Isolation, UnknownIsolation};
pub use crate::json::JsonValue;
pub use crate::language::{AsLanguage, Language, UnknownLanguage};
pub use crate::limits::{Budget, Limits, RunLimits};
pub use crate::request::{Approvals, CodeRunRequest, Resume};
pub use crate::result::{CodeRunFailure, CodeRunResult, FailureKind, Truncated};
pub use crate::runtime::{CodeRuntime, WithApprovals};
pub use crate::session::{
    Capture, Definition, DirectorySessionStore, Dropped, DroppedName, Kept, Loaded,
    MemorySessionStore, Restored, SessionError, SessionId, SessionReport, SessionState,
    SessionStore, SessionSummary, SessionValue, Sessions, TurnHold,
};
/// Re-exported because it appears in [`CodeRunRequest::signal`]; any `tokio-util` 0.7 token is
/// the same type.
pub use tokio_util::sync::CancellationToken;

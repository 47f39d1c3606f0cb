//! The service definition of code-runtime: run one model-written program in isolation against
//! host-provided async functions, and get back only what it printed and returned.
//!
//! This crate is what consumers depend on. It names no engine and spawns nothing: the providers
//! (`code-runtime-worker-thread` for TypeScript on V8, `code-runtime-python` for CPython) implement
//! [`CodeRuntime`], and a host registers one of them in a [`Context`] at startup.
//!
//! ## Core concepts
//!
//! - [`CodeRuntime`]: the service. One per host, shared as `Arc<dyn CodeRuntime>`, alive from
//!   startup to [`CodeRuntime::dispose`]. Holds validated configuration ([`Limits`]) and nothing
//!   per run; creating one costs what the provider's start-up costs (initialising V8 once,
//!   resolving the interpreter path once).
//! - [`CodeRunRequest`]: one program plus its [`CodeBindingNamespace`]s and an optional
//!   cancellation token. Lives for one call of [`CodeRuntime::run`]; the program is the body of an
//!   async function, so top-level `await` and `return` work.
//! - [`BindingFunction`]: a host async closure, `JsonValue -> Result<JsonValue, BindingError>`,
//!   built with [`binding`]. Cloned into each run (an `Arc` clone); each program call costs one
//!   closure call plus a JSON conversion on each side.
//! - [`CodeRunResult`]: what came back: `logs`, then either `value` or `error`
//!   ([`CodeRunFailure`] with one of six [`FailureKind`]s). Everything a program does, including
//!   crashing its substrate, is a result; only misuse of the contract is a [`ContractError`].
//! - [`JsonValue`]: the only thing that crosses between a program and the host, checked *lossless*
//!   by [`json::validate`] (finite, no `-0`, integers exact as a double, valid Unicode, any depth).
//! - [`OutputLedger`]: one combined byte budget per run over `JSON(logs)` plus `JSON(value)` (or
//!   the error message). Lives for one run; every provider builds its result through
//!   [`OutputLedger::settle`], so both languages fail at the same byte.
//!
//! ## Example
//!
//! ```
//! use code_runtime::{binding, CodeBindingNamespace, CodeRunRequest};
//! use serde_json::json;
//!
//! let request = CodeRunRequest::new("const r = await tools.search({ q: 'rust' }); return r.hits;")
//!     .binding(
//!         CodeBindingNamespace::new("tools")
//!             .function("search", binding(|args| async move { Ok(json!({ "hits": [args["q"]] })) }))
//!             .error_class("ToolCallError", "toolName"),
//!     );
//! // `runtime.run(request).await?` on any provider returns `{"logs":[],"value":["rust"]}`.
//! # code_runtime::validate_bindings(&request.bindings).unwrap();
//! ```
//!
//! ## What lives here, once
//!
//! Every provider imports these rules instead of restating them: binding-name validation
//! ([`validate_bindings`] and the constants beside it), the lossless-JSON rules and walks
//! ([`json`]), the output ledger ([`OutputLedger`]), the failure-message catalogue
//! ([`CodeRunFailure`]'s constructors), the budgets ([`Limits`]) and the disposal rule
//! ([`RunGate`]).
#![warn(missing_docs, missing_debug_implementations)]

mod binding;
mod context;
mod error;
pub mod json;
mod ledger;
mod lifecycle;
mod limits;
mod request;
mod result;
mod runtime;
mod validation;

pub use crate::binding::{
    BindingError, BindingFunction, BindingFuture, CodeBindingErrorClass, CodeBindingNamespace,
    binding,
};
pub use crate::context::Context;
pub use crate::error::{ConfigError, ContractError};
pub use crate::json::JsonValue;
pub use crate::ledger::{Admission, Outcome, OutputLedger};
pub use crate::lifecycle::{RunGate, RunPermit};
pub use crate::limits::Limits;
pub use crate::request::CodeRunRequest;
pub use crate::result::{CodeRunFailure, CodeRunResult, FailureKind};
pub use crate::runtime::CodeRuntime;
pub use crate::validation::{
    PORTABLE_RESERVED_WORDS, PROGRAM_WRAPPER_NAME, RESERVED_BINDING_GLOBALS,
    RESERVED_ERROR_MEMBERS, is_dunder_member, is_portable_identifier, is_usable_identifier,
    validate_bindings,
};
/// Re-exported because [`CodeRuntime`] is declared with it; implementors write
/// `#[code_runtime::async_trait]`.
pub use async_trait::async_trait;
/// Re-exported because it appears in [`CodeRunRequest::signal`] and [`CodeRuntime::run`]'s
/// contract; any `tokio-util` 0.7 token is the same type.
pub use tokio_util::sync::CancellationToken;

//! The error types of the crate boundary: [`ContractError`] for misuse of `run`, [`ConfigError`]
//! for an invalid provider configuration, [`ContextError`] for misuse of a [`Context`].
//!
//! None is ever caused by what a program does: program failures are result fields
//! ([`CodeRunFailure`](crate::CodeRunFailure)).
//!
//! [`Context`]: crate::Context

use crate::json;

/// Misuse of the service contract: `run()` rejects with this, and only with this.
///
/// The binding-declaration variants are checked in the order docs/reference.md §2.2 fixes (see
/// [`provider::validate_bindings`](crate::provider::validate_bindings)); their messages name the
/// offending string JSON-quoted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// A namespace `global` that is not a portable identifier or is a reserved word.
    #[error("code-runtime: binding global {} is not a usable identifier", json::quote(.global))]
    UnusableGlobal {
        /// The offending global.
        global: String,
    },
    /// A namespace `global` or error-class name that the runtime itself reserves.
    #[error("code-runtime: reserved binding global {}", json::quote(.name))]
    ReservedGlobal {
        /// The offending name.
        name: String,
    },
    /// A namespace `global` or error-class name that would hide a global the program needs: an
    /// ECMAScript global such as `Promise` or `JSON`, or a Python builtin such as `print` or
    /// `len` (docs/design.md §9 item 9).
    #[error("code-runtime: binding global {} would shadow a global the program needs", json::quote(.name))]
    ShadowedGlobal {
        /// The offending name.
        name: String,
    },
    /// Two namespaces with the same `global`.
    #[error("code-runtime: duplicate binding global {}", json::quote(.global))]
    DuplicateGlobal {
        /// The repeated global.
        global: String,
    },
    /// An error-class name that is not a portable identifier or is a reserved word.
    #[error("code-runtime: binding error class {} is not a usable identifier", json::quote(.name))]
    UnusableErrorClass {
        /// The offending class name.
        name: String,
    },
    /// An error-class name equal to a namespace global or to another error-class name.
    #[error("code-runtime: duplicate injected global {}", json::quote(.name))]
    DuplicateInjectedGlobal {
        /// The repeated name.
        name: String,
    },
    /// An error class's `member_name_property` that is empty, reserved or a dunder name.
    #[error("code-runtime: binding error member property {} is not usable", json::quote(.property))]
    UnusableMemberProperty {
        /// The offending property name.
        property: String,
    },
    /// A function of a namespace whose functions are also globals
    /// ([`functions_as_globals`](crate::CodeBindingNamespace::functions_as_globals)) whose name
    /// is not a usable identifier.
    #[error("code-runtime: binding {} cannot be a global: its name is not a usable identifier", json::quote(.binding))]
    UnusableFunctionGlobal {
        /// The function, as `global.name`.
        binding: String,
    },
    /// A value of the request ([`CodeRunRequest::values`](crate::CodeRunRequest::values)) whose
    /// name is not a usable identifier.
    #[error("code-runtime: value name {} is not a usable identifier", json::quote(.name))]
    UnusableValueName {
        /// The offending name.
        name: String,
    },
    /// A value of the request that is not lossless JSON (an integer no double holds exactly), or
    /// that nests more deeply than [`MAX_VALUE_DEPTH`](crate::provider::MAX_VALUE_DEPTH).
    #[error("code-runtime: value {} is unusable: {why}", json::quote(.name))]
    UnusableValue {
        /// The value's name.
        name: String,
        /// Why not.
        why: String,
    },
    /// A per-request limit ([`RunLimits`](crate::RunLimits)) that is zero or above the
    /// provider's: a request may tighten a budget, never loosen it.
    #[error(
        "code-runtime: request limit {key} must be between 1 and the provider's {provider}, got {value}"
    )]
    InvalidRunLimit {
        /// The limit, as [`Limits`](crate::Limits) spells it.
        key: &'static str,
        /// What the request asked for.
        value: u64,
        /// The provider's value, the largest allowed.
        provider: u64,
    },
    /// A function that [validates its input](crate::BindingFunction::validate_input) whose
    /// input schema is missing or does not compile.
    #[error("code-runtime: binding {} has an unusable input schema: {why}", json::quote(.binding))]
    InvalidInputSchema {
        /// The function, as `global.name`.
        binding: String,
        /// Why the schema is unusable.
        why: String,
    },
    /// A function whose [approval rule](crate::BindingFunction::approval) has a `When` schema
    /// that does not compile.
    #[error("code-runtime: binding {} has an unusable approval schema: {why}", json::quote(.binding))]
    InvalidApprovalSchema {
        /// The function, as `global.name`.
        binding: String,
        /// Why the schema is unusable.
        why: String,
    },
    /// A session ([`CodeRunRequest::session`](crate::CodeRunRequest::session)) the request cannot
    /// name: its name is unusable, or the runtime carries no sessions.
    #[error("code-runtime: session {} is unusable: {why}", json::quote(.name))]
    UnusableSession {
        /// The session's name (at most its first 128 characters).
        name: String,
        /// Why.
        why: String,
    },
    /// A resumed request's checkpoint or decisions were refused; nothing ran.
    #[error("code-runtime: cannot resume: {0}")]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
    /// `run()` on a provider after `dispose()`.
    #[error("code-runtime: run() after disposal")]
    Disposed,
    /// [`describe`](crate::describe) was asked for a language it does not render.
    #[error("code-runtime: unknown language {} (typescript or python)", json::quote(.language))]
    UnknownLanguage {
        /// The language asked for.
        language: String,
    },
}

/// Misuse of a [`Context`](crate::Context).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// A second provider of the same language.
    #[error("code-runtime: a {} code runtime is already registered in this context", json::quote(.language))]
    AlreadyRegistered {
        /// The provider's language.
        language: String,
    },
    /// No provider of that language is registered.
    #[error("code-runtime: no {} code runtime is registered in this context", json::quote(.language))]
    NotRegistered {
        /// The language asked for.
        language: String,
    },
    /// The context was disposed.
    #[error("code-runtime: the context is disposed")]
    Disposed,
}

/// An invalid provider configuration, reported when the provider is constructed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("code-runtime: config.{key} {requirement}, got {value}")]
pub struct ConfigError {
    key: &'static str,
    requirement: &'static str,
    value: String,
}

impl ConfigError {
    /// An error for the setting `key` (as spelled in the provider's config, e.g. `compute_ms`),
    /// which must satisfy `requirement` (e.g. `must be a positive number`) but is `value`.
    pub fn new(key: &'static str, requirement: &'static str, value: impl ToString) -> Self {
        Self { key, requirement, value: value.to_string() }
    }

    /// The offending setting.
    pub fn key(&self) -> &'static str {
        self.key
    }
}

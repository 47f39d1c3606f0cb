//! The two error types of the crate boundary: [`ContractError`] for misuse of the service, and
//! [`ConfigError`] for invalid provider configuration.
//!
//! Neither is ever caused by what a program does: program failures are result fields
//! ([`CodeRunFailure`](crate::CodeRunFailure)).

use crate::json;

/// Misuse of the service contract: `run()` rejects with this, and only with this.
///
/// The binding-declaration variants are produced by
/// [`validate_bindings`](crate::validate_bindings) in the order REFERENCE.md §2.2 fixes; their
/// messages name the offending string JSON-quoted.
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
    /// `run()` on a provider after `dispose()`.
    #[error("code-runtime: run() after disposal")]
    Disposed,
    /// A second provider registered in the same [`Context`](crate::Context).
    #[error("code-runtime: a code runtime is already registered in this context")]
    AlreadyRegistered,
    /// [`Context::code_runtime`](crate::Context::code_runtime) before any provider was registered.
    #[error("code-runtime: no code runtime is registered in this context")]
    NotRegistered,
    /// [`Context::code_runtime`](crate::Context::code_runtime) after the context was disposed.
    #[error("code-runtime: code runtime requested after disposal of its context")]
    ContextDisposed,
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

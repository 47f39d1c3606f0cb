//! Bindings: the host's async functions a program may call, grouped into namespaces.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::json::JsonValue;

/// The future a [`BindingFunction`] returns.
pub type BindingFuture = Pin<Box<dyn Future<Output = Result<JsonValue, BindingError>> + Send>>;

/// A host function a program can await: one JSON argument in, one JSON value (or a
/// [`BindingError`]) out.
///
/// Cheap to clone (an `Arc`). Each call gets a detached copy of the program's argument; the
/// resolution must be lossless JSON or the program's call rejects with
/// `binding resolution must be lossless JSON`. A provider never cancels a call it started: when the
/// run ends first, the future is dropped at its next await point or left to finish, and its result
/// is discarded.
///
/// Build one with [`binding`].
#[derive(Clone)]
pub struct BindingFunction(Arc<dyn Fn(JsonValue) -> BindingFuture + Send + Sync>);

/// Wraps an async closure as a [`BindingFunction`].
///
/// ```
/// use code_runtime::{binding, BindingError, CodeBindingNamespace};
/// use serde_json::json;
///
/// let tools = CodeBindingNamespace::new("tools")
///     .function("echo", binding(|args| async move { Ok(args) }))
///     .function("search", binding(|args| async move {
///         let query = args["q"].as_str().ok_or_else(|| BindingError::new("q must be a string"))?;
///         Ok(json!({ "hits": [query] }))
///     }));
/// # assert_eq!(tools.functions.len(), 2);
/// ```
pub fn binding<F, Fut>(function: F) -> BindingFunction
where
    F: Fn(JsonValue) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<JsonValue, BindingError>> + Send + 'static,
{
    BindingFunction(Arc::new(move |args| Box::pin(function(args))))
}

impl BindingFunction {
    /// Starts one call with `args`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops the host closure's future at its current await point.
    pub fn call(&self, args: JsonValue) -> BindingFuture {
        (self.0)(args)
    }
}

impl fmt::Debug for BindingFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BindingFunction(..)")
    }
}

/// Why a binding call failed. The message is exactly what the program sees: the rejection's
/// `message` in TypeScript, `str(e)` in Python, as an instance of the namespace's error class when
/// one is declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingError {
    message: String,
}

impl BindingError {
    /// A rejection with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }

    /// The message the program sees.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for BindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BindingError {}

impl From<String> for BindingError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for BindingError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

/// One program-visible object of bindings, named `global`, with one async member per function.
///
/// Function names are arbitrary strings, matched exactly as own entries: `__proto__`,
/// `constructor`, `my-tool` and `""` are ordinary names, and no name resolves to an inherited
/// member. The declaration is checked by [`validate_bindings`](crate::validate_bindings) when a
/// run starts.
#[derive(Clone, Debug, Default)]
pub struct CodeBindingNamespace {
    /// The program-visible name of the namespace object, e.g. `tools`.
    pub global: String,
    /// The members, in declaration order.
    pub functions: IndexMap<String, BindingFunction>,
    /// The error class every rejected call of this namespace is an instance of, if any.
    pub error_class: Option<CodeBindingErrorClass>,
}

impl CodeBindingNamespace {
    /// An empty namespace named `global`.
    pub fn new(global: impl Into<String>) -> Self {
        Self { global: global.into(), ..Self::default() }
    }

    /// Adds (or replaces) the member `name`.
    pub fn function(mut self, name: impl Into<String>, function: BindingFunction) -> Self {
        self.functions.insert(name.into(), function);
        self
    }

    /// Declares the namespace's error class.
    pub fn error_class(
        mut self,
        name: impl Into<String>,
        member_name_property: impl Into<String>,
    ) -> Self {
        self.error_class = Some(CodeBindingErrorClass {
            name: name.into(),
            member_name_property: member_name_property.into(),
        });
        self
    }
}

/// A real error type the runtime injects for a namespace: a JavaScript `Error` subclass or a Python
/// `Exception` subclass, program-visible under `name`.
///
/// Every rejected call on the namespace is an instance with `name == self.name`, the host's message,
/// and an own property `member_name_property` holding the exact member name that failed. Both
/// strings are data; the runtime knows nothing of "tools".
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodeBindingErrorClass {
    /// The class name, e.g. `ToolCallError`.
    pub name: String,
    /// The own property naming the failed member, e.g. `toolName`.
    pub member_name_property: String,
}

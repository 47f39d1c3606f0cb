//! [`Bindings`]: binding namespaces checked once, at a host's startup, for many requests.

use std::sync::Arc;

use crate::binding::CodeBindingNamespace;
use crate::error::ContractError;
use crate::language::Language;
use crate::request::CodeRunRequest;

/// Binding namespaces checked once, for many requests: what a host builds at startup from its
/// tools, so an invalid declaration fails there, and then hands every run
/// ([`CodeRunRequest::with_bindings`]). Cheap to clone.
///
/// The checks are those of [`CodeRuntime::run`](crate::CodeRuntime::run): names, reserved words,
/// error classes, input schemas (compiled here, once, and shared by every request and every
/// clone). A run still checks the names of the namespaces it is given (its request's fields are
/// public, so they may have changed since), which costs microseconds; the schemas it does not
/// compile again.
///
/// ```
/// use code_runtime::{Bindings, CodeBindingNamespace, CodeRunRequest, Language, binding};
///
/// let tools = CodeBindingNamespace::new("tools")
///     .function("echo", binding(|args| async move { Ok(args.into()) }));
/// let bindings = Bindings::new([tools])?;
/// let request = CodeRunRequest::with_bindings("return await tools.echo(1)", &bindings);
/// assert_eq!(request.bindings.len(), 1);
/// assert!(bindings.describe(Language::TypeScript).contains("echo"));
/// assert!(Bindings::new([CodeBindingNamespace::new("lambda")]).is_err());
/// # Ok::<(), code_runtime::ContractError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Bindings {
    namespaces: Arc<[CodeBindingNamespace]>,
}

impl Bindings {
    /// Checks `namespaces` as a run would.
    ///
    /// # Errors
    ///
    /// The [`ContractError`] a run of them would fail with.
    pub fn new(
        namespaces: impl IntoIterator<Item = CodeBindingNamespace>,
    ) -> Result<Self, ContractError> {
        let namespaces: Arc<[CodeBindingNamespace]> = namespaces.into_iter().collect();
        crate::validation::validate_bindings(&namespaces)?;
        Ok(Self { namespaces })
    }

    /// The namespaces, in order.
    pub fn namespaces(&self) -> &[CodeBindingNamespace] {
        &self.namespaces
    }

    /// What the model should read about them in `language` ([`describe`](crate::describe)):
    /// checked already, they always render.
    pub fn describe(&self, language: Language) -> String {
        crate::declaration::render_checked(&self.namespaces, language)
    }
}

impl CodeRunRequest {
    /// A request for `program` against `bindings`, checked already. The namespaces are cloned
    /// into it; their functions (closures, schemas, compiled input schemas) are shared.
    pub fn with_bindings(program: impl Into<String>, bindings: &Bindings) -> Self {
        Self { program: program.into(), bindings: bindings.namespaces.to_vec(), ..Self::default() }
    }
}

//! [`NativeNamespace`]: the declaration of a namespace of Python functions, checked as a run
//! would check it each time it changes (so a bad name fails where it was written), and bound to
//! each run's dispatcher when the run starts ([`NativeNamespace::bound`]).

use std::sync::{Arc, Mutex, PoisonError};

use code_runtime::provider::validate_request;
use code_runtime::{
    ApprovalRule, BindingArgs, BindingError, CodeBindingNamespace, CodeRunRequest, JsonValue,
    binding,
};
use pyo3::prelude::*;

use crate::driver::Waiting;
use crate::reply::CallReply;
use crate::{contract_error, conversion};

/// A namespace of Python functions, as the package's `Namespace` declares it.
#[pyclass(frozen, module = "code_runtime._native")]
pub(crate) struct NativeNamespace {
    /// The declaration: its functions' closures are placeholders a run replaces.
    namespace: Mutex<CodeBindingNamespace>,
}

impl NativeNamespace {
    /// The namespace as declared (for [`describe`](crate::runtime::describe)).
    pub(crate) fn namespace(&self) -> CodeBindingNamespace {
        self.namespace.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The namespace for one run: each function calls `invoke(function, argument, reply)`, the
    /// run's dispatcher, which starts the call on the run's event loop and returns a callable
    /// that cancels it (or `None`); the call answers through `reply` ([`CallReply`]). The
    /// declaration (schemas, compiled checks) is shared, not copied.
    pub(crate) fn bound(&self, invoke: Py<PyAny>) -> CodeBindingNamespace {
        let mut namespace = self.namespace();
        let invoke = Arc::new(invoke);
        let global = namespace.global.clone();
        for (name, function) in namespace.functions.iter_mut() {
            let call = Arc::new(Call {
                label: format!("{global}.{name}"),
                function: name.clone(),
                invoke: invoke.clone(),
            });
            *function = function.with_call(move |args| call.clone().start(args));
        }
        namespace
    }
}

/// `namespace` if a run of it alone would accept it: its names, its schemas, and its functions'
/// names when they are also globals.
fn checked(namespace: CodeBindingNamespace) -> PyResult<CodeBindingNamespace> {
    let request = CodeRunRequest::new("").binding(namespace);
    validate_request(&request).map_err(contract_error)?;
    Ok(request.bindings.into_iter().next().unwrap_or_default())
}

#[pymethods]
impl NativeNamespace {
    #[new]
    #[pyo3(signature = (name, *, description = None, error_class = None, member_property = "tool".to_owned(), functions_as_globals = false))]
    fn new(
        name: String,
        description: Option<String>,
        error_class: Option<String>,
        member_property: String,
        functions_as_globals: bool,
    ) -> PyResult<Self> {
        let mut namespace = CodeBindingNamespace::new(name);
        if let Some(text) = description {
            namespace = namespace.description(text);
        }
        if let Some(class) = error_class {
            namespace = namespace.error_class(class, member_property);
        }
        if functions_as_globals {
            namespace = namespace.functions_as_globals();
        }
        Ok(Self { namespace: Mutex::new(checked(namespace)?) })
    }

    /// Adds (or replaces) the function `name` ([`bound`](NativeNamespace::bound) says how a
    /// run calls it).
    #[pyo3(signature = (name, *, description = None, input_schema = None, output_schema = None, approval = None, validate_input = false))]
    fn add(
        &self,
        name: String,
        description: Option<String>,
        input_schema: Option<&Bound<'_, PyAny>>,
        output_schema: Option<&Bound<'_, PyAny>>,
        approval: Option<&Bound<'_, PyAny>>,
        validate_input: bool,
    ) -> PyResult<()> {
        let mut namespace = self.namespace();
        let mut function = binding(|_args| async { Err(BindingError::new("not bound to a run")) });
        if let Some(text) = description {
            function = function.description(text);
        }
        if let Some(schema) = input_schema {
            function = function.input(schema_value(schema, "input_schema")?);
        }
        if let Some(schema) = output_schema {
            function = function.output(schema_value(schema, "output_schema")?);
        }
        if validate_input {
            function = function.validate_input();
        }
        if let Some(rule) = approval.map(approval_rule).transpose()?.flatten() {
            function = function.approval(rule);
        }
        namespace = namespace.function(name, function);
        *self.namespace.lock().unwrap_or_else(PoisonError::into_inner) = checked(namespace)?;
        Ok(())
    }

    /// The namespace's global name.
    #[getter]
    fn name(&self) -> String {
        self.namespace.lock().unwrap_or_else(PoisonError::into_inner).global.clone()
    }

    /// The function names, in order.
    #[getter]
    fn functions(&self) -> Vec<String> {
        let namespace = self.namespace.lock().unwrap_or_else(PoisonError::into_inner);
        namespace.functions.keys().cloned().collect()
    }
}

fn schema_value(schema: &Bound<'_, PyAny>, what: &str) -> PyResult<code_runtime::JsonValue> {
    conversion::from_python(schema).map_err(|why| contract_error(format!("{what}: {why}")))
}

/// `True` (every call), `False` or `None` (none), or `{"when": schema}`.
fn approval_rule(approval: &Bound<'_, PyAny>) -> PyResult<Option<ApprovalRule>> {
    if approval.is_none() {
        return Ok(None);
    }
    if let Ok(flag) = approval.extract::<bool>() {
        return Ok(flag.then_some(ApprovalRule::Always));
    }
    let value = conversion::from_python(approval)
        .map_err(|why| contract_error(format!("approval: {why}")))?;
    match value.as_object().map(|rule| (rule.len(), rule.get("when"))) {
        Some((1, Some(schema))) => Ok(Some(ApprovalRule::When(schema.clone()))),
        _ => Err(contract_error(
            "approval is True, False, None or {\"when\": <a JSON Schema of the argument>}",
        )),
    }
}

/// One function of one run: how its calls reach Python.
struct Call {
    /// `tools.search`, for messages.
    label: String,
    function: String,
    /// The run's dispatcher.
    invoke: Arc<Py<PyAny>>,
}

impl Call {
    /// Hands the call to the dispatcher and waits for its reply. Dropping the future (the run
    /// ended or was cancelled) calls the cancel callable the dispatcher returned, so the Python
    /// task stops too.
    async fn start(self: Arc<Self>, args: BindingArgs) -> Result<JsonValue, BindingError> {
        let label = &self.label;
        let (reply, answer) = CallReply::new(label.clone());
        let argument = args.into_value();
        let started = Python::try_attach(|py| -> PyResult<Option<Py<PyAny>>> {
            let value = conversion::to_python(py, &argument)?;
            let cancel = self.invoke.call1(py, (&self.function, value, reply))?;
            Ok((!cancel.is_none(py)).then_some(cancel))
        });
        let cancel = match started {
            Some(Ok(cancel)) => cancel,
            Some(Err(error)) => {
                return Err(BindingError::new(format!("{label} could not be called: {error}")));
            }
            None => return Err(BindingError::new(format!("{label}: Python is shutting down"))),
        };
        let mut guard = CancelOnDrop(cancel);
        let _in_python = Waiting::in_python();
        let outcome = answer
            .await
            .unwrap_or_else(|_| Err(BindingError::new(format!("{label} ended without an answer"))));
        guard.0 = None;
        outcome
    }
}

/// Calls the Python cancel callable unless disarmed.
struct CancelOnDrop(Option<Py<PyAny>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            // A cancel that fails (its loop closed) has nothing left to stop.
            Python::try_attach(|py| drop(cancel.call0(py)));
        }
    }
}

//! A Python approver as an [`Approver`]: each request goes to the package's trampoline, which
//! runs the user's approver on the caller's event loop and answers through a [`DecisionReply`].

use code_runtime::{ApprovalRequest, Approver, Decision, provider::async_trait};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::conversion;
use crate::reply::DecisionReply;

/// Calls `decide(request, reply)` for each call that needs approval.
pub(crate) struct PythonApprover {
    pub(crate) decide: Py<PyAny>,
}

/// The request as the package's `ApprovalRequest` is built from: a dict.
pub(crate) fn request_dict<'py>(
    py: Python<'py>,
    request: &ApprovalRequest,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("namespace", &request.namespace)?;
    dict.set_item("function", &request.function)?;
    dict.set_item("args", conversion::to_python(py, &request.args)?)?;
    dict.set_item("summary", &request.summary)?;
    dict.set_item("call", request.call)?;
    Ok(dict)
}

#[async_trait]
impl Approver for PythonApprover {
    async fn decide(&self, request: &ApprovalRequest) -> Decision {
        let (reply, decision) = DecisionReply::new();
        let _in_python = crate::driver::Waiting::in_python();
        let asked = Python::try_attach(|py| -> PyResult<()> {
            self.decide.call1(py, (request_dict(py, request)?, reply))?;
            Ok(())
        });
        match asked {
            Some(Ok(())) => {}
            Some(Err(error)) => return Decision::deny(format!("the approver failed: {error}")),
            None => return Decision::deny("Python is shutting down"),
        }
        decision.await.unwrap_or_else(|_| Decision::deny("the approver ended without a decision"))
    }

    fn name(&self) -> &str {
        "python"
    }
}

//! A run's outcome as the tuple the package builds its `RunResult` (or `ContractError`) from.

use code_runtime::{CodeRunResult, ContractError, Restored, SessionReport};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::conversion;

/// `("result", logs, value, error, paused, truncated, session)` or `("contract", message)`:
/// `error` is `(kind, message)`, `paused` is `(checkpoint bytes, [pending call dicts])`,
/// `truncated` is `(from_bytes, to_bytes)`, `session` a dict of the session's report (its keys
/// snake_case).
pub(crate) fn outcome_tuple<'py>(
    py: Python<'py>,
    outcome: Result<CodeRunResult, ContractError>,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut result = match outcome {
        Ok(result) => result,
        Err(error) => return PyTuple::new(py, ["contract".to_owned(), error.to_string()]),
    };
    let paused = match result.take_paused() {
        Some(paused) => {
            let pending = PyList::empty(py);
            for call in &paused.pending {
                let dict = PyDict::new(py);
                dict.set_item("id", call.id)?;
                dict.set_item("namespace", &call.namespace)?;
                dict.set_item("function", &call.function)?;
                dict.set_item("args", conversion::to_python(py, &call.args)?)?;
                pending.append(dict)?;
            }
            let checkpoint = PyBytes::new(py, paused.checkpoint.to_json().as_bytes());
            (checkpoint, pending).into_pyobject(py)?.into_any()
        }
        None => py.None().into_bound(py),
    };
    let value = match result.value() {
        Some(value) => conversion::to_python(py, value)?,
        None => py.None().into_bound(py),
    };
    let error = match result.error() {
        Some(failure) => (failure.kind().as_str(), failure.message()).into_pyobject(py)?.into_any(),
        None => py.None().into_bound(py),
    };
    let truncated = match result.truncated() {
        Some(truncated) => (truncated.from_bytes, truncated.to_bytes).into_pyobject(py)?.into_any(),
        None => py.None().into_bound(py),
    };
    let session = match result.session() {
        Some(report) => session_dict(py, report)?.into_any(),
        None => py.None().into_bound(py),
    };
    let logs = PyList::new(py, result.logs())?;
    let tag = "result".into_pyobject(py)?.into_any();
    PyTuple::new(py, [tag, logs.into_any(), value, error, paused, truncated, session])
}

/// A session's report: `{name, run, restored, kept: [{name, type, bytes}], dropped: [{name,
/// why}], bytes, expires_in_ms, unchanged}`.
fn session_dict<'py>(py: Python<'py>, report: &SessionReport) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("name", &report.name)?;
    dict.set_item("run", report.run)?;
    let restored = match report.restored {
        Restored::New => "new",
        Restored::Continued => "continued",
        Restored::Expired => "expired",
    };
    dict.set_item("restored", restored)?;
    let kept = PyList::empty(py);
    for entry in &report.kept {
        let item = PyDict::new(py);
        item.set_item("name", &entry.name)?;
        item.set_item("type", &entry.type_name)?;
        item.set_item("bytes", entry.bytes)?;
        kept.append(item)?;
    }
    dict.set_item("kept", kept)?;
    let dropped = PyList::empty(py);
    for entry in &report.dropped {
        let item = PyDict::new(py);
        item.set_item("name", &entry.name)?;
        item.set_item("why", &entry.why)?;
        dropped.append(item)?;
    }
    dict.set_item("dropped", dropped)?;
    dict.set_item("bytes", report.bytes)?;
    dict.set_item("expires_in_ms", report.expires_in_ms)?;
    dict.set_item("unchanged", &report.unchanged)?;
    Ok(dict)
}

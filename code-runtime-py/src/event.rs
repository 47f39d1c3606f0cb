//! A run's [`RunEvent`]s as Python dicts, for the `on_event` callable of a run.

use code_runtime::{Decision, EventSink, RunEvent};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::approver::request_dict;
use crate::conversion;

/// A sink that hands each event, as a dict with a `"type"`, to `deliver` (the package's
/// trampoline, which calls the user's `on_event` on the caller's event loop). A failing
/// `deliver` is reported as unraisable: an event sink cannot end a run.
pub(crate) fn sink(deliver: Py<PyAny>) -> EventSink {
    EventSink::new(move |event| {
        Python::try_attach(|py| {
            let delivered = event_dict(py, event)
                .and_then(|dict| dict.map(|dict| deliver.call1(py, (dict,))).transpose());
            if let Err(error) = delivered {
                error.write_unraisable(py, None);
            }
        });
    })
}

fn event_dict<'py>(py: Python<'py>, event: RunEvent<'_>) -> PyResult<Option<Bound<'py, PyDict>>> {
    let dict = PyDict::new(py);
    match event {
        RunEvent::Log { line } => {
            dict.set_item("type", "log")?;
            dict.set_item("line", line)?;
        }
        RunEvent::Call { id, namespace, function, args } => {
            dict.set_item("type", "call")?;
            dict.set_item("id", id)?;
            dict.set_item("namespace", namespace)?;
            dict.set_item("function", function)?;
            dict.set_item("args", conversion::to_python(py, args)?)?;
        }
        RunEvent::Settled { id, error, duration } => {
            dict.set_item("type", "settled")?;
            dict.set_item("id", id)?;
            dict.set_item("error", error)?;
            dict.set_item("duration_ms", duration.as_secs_f64() * 1000.0)?;
        }
        RunEvent::ApprovalRequested { id, request } => {
            dict.set_item("type", "approval_requested")?;
            dict.set_item("id", id)?;
            dict.set_item("request", request_dict(py, request)?)?;
        }
        RunEvent::ApprovalDecided { id, decision, by } => {
            dict.set_item("type", "approval_decided")?;
            dict.set_item("id", id)?;
            dict.set_item("decision", decision.as_str())?;
            if let Decision::Deny(reason) = decision {
                dict.set_item("reason", reason)?;
            }
            dict.set_item("by", by)?;
        }
        RunEvent::End { kind } => {
            dict.set_item("type", "end")?;
            dict.set_item("kind", kind.map(|kind| kind.as_str()))?;
        }
        // Events this package does not know yet are not passed on half-described.
        _ => return Ok(None),
    }
    Ok(Some(dict))
}

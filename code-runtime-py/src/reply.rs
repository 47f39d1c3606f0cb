//! The objects through which Python answers Rust: a binding call's [`CallReply`] and an
//! approval's [`DecisionReply`]. Each holds the sending half of a oneshot channel the waiting
//! Rust future listens on; the first answer wins, later ones are ignored. A reply dropped
//! without an answer (the Python side lost it) closes the channel, which the waiting side turns
//! into a rejection or a denial, never a hang.

use std::sync::{Mutex, PoisonError};

use code_runtime::{BindingError, Decision, JsonValue};
use pyo3::prelude::*;
use tokio::sync::oneshot;

use crate::conversion;

type Slot<T> = Mutex<Option<oneshot::Sender<T>>>;

fn send<T>(slot: &Slot<T>, answer: T) -> bool {
    let sender = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    sender.is_some_and(|sender| sender.send(answer).is_ok())
}

fn closed<T>(slot: &Slot<T>) -> bool {
    slot.lock().unwrap_or_else(PoisonError::into_inner).as_ref().is_none_or(|s| s.is_closed())
}

/// The answer to one binding call.
#[pyclass(frozen, module = "code_runtime._native")]
pub(crate) struct CallReply {
    sender: Slot<Result<JsonValue, BindingError>>,
    /// `tools.search`, for the message of a value that is not JSON.
    label: String,
}

impl CallReply {
    pub(crate) fn new(label: String) -> (Self, oneshot::Receiver<Result<JsonValue, BindingError>>) {
        let (sender, receiver) = oneshot::channel();
        (Self { sender: Mutex::new(Some(sender)), label }, receiver)
    }
}

#[pymethods]
impl CallReply {
    /// Resolves the call with `value`. A value that is not JSON rejects it instead, with a
    /// `TypeError` message that names the type and where it was. Returns whether the answer
    /// was taken (not when the call was answered already or the run has ended).
    fn resolve(&self, value: &Bound<'_, PyAny>) -> bool {
        let answer = conversion::from_python(value)
            .map_err(|why| BindingError::new(format!("TypeError: {} returned {why}", self.label)));
        send(&self.sender, answer)
    }

    /// Rejects the call with `message`, and `data` (JSON) the program reads as the error's
    /// `data`; data that is not JSON is left out and said in the message.
    #[pyo3(signature = (message, data = None))]
    fn reject(&self, message: String, data: Option<&Bound<'_, PyAny>>) -> bool {
        let error = match data.filter(|data| !data.is_none()).map(conversion::from_python) {
            None => BindingError::new(message),
            Some(Ok(data)) => BindingError::new(message).with_data(data),
            Some(Err(why)) => {
                BindingError::new(format!("{message} (its data was left out: {why})"))
            }
        };
        send(&self.sender, Err(error))
    }

    /// Whether the call no longer waits: answered, or its run ended.
    #[getter]
    fn done(&self) -> bool {
        closed(&self.sender)
    }
}

/// The decision on one call that needs approval.
#[pyclass(frozen, module = "code_runtime._native")]
pub(crate) struct DecisionReply {
    sender: Slot<Decision>,
}

impl DecisionReply {
    pub(crate) fn new() -> (Self, oneshot::Receiver<Decision>) {
        let (sender, receiver) = oneshot::channel();
        (Self { sender: Mutex::new(Some(sender)) }, receiver)
    }
}

#[pymethods]
impl DecisionReply {
    /// `"allow"`, `"pause"`, or `"deny"` with a reason; anything else is a `ValueError`.
    #[pyo3(signature = (decision, reason = None))]
    fn decide(&self, decision: &str, reason: Option<String>) -> PyResult<bool> {
        let decision = match decision {
            "allow" => Decision::Allow,
            "pause" => Decision::Pause,
            "deny" => Decision::deny(reason.unwrap_or_else(|| "denied by the approver".to_owned())),
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "a decision is \"allow\", \"deny\" or \"pause\", not {other:?}"
                )));
            }
        };
        Ok(send(&self.sender, decision))
    }

    /// Whether the call no longer waits.
    #[getter]
    fn done(&self) -> bool {
        closed(&self.sender)
    }
}

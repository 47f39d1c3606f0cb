//! `code_runtime._native`: the extension module under the Python package `code_runtime`
//! (`python/code_runtime`, which is the API users import and type-check against).
//!
//! The split: Rust owns everything the contract says (providers, validation, the JSON rules,
//! results) and every conversion between Python objects and [`JsonValue`]s, done without
//! recursion whatever the depth (`conversion.rs`). Python owns asyncio: each run's `done`
//! callback, each binding call and each approval is handed to a Python callable that schedules
//! the work on the caller's event loop and answers through a reply object (`reply.rs`).
//!
//! Runs are polled on the caller's event loop thread, with the GIL released while they are
//! (`driver.rs`); disposal runs on this module's executor (`executor.rs`). Every method that may
//! wait releases the GIL first (`Python::detach`).
//!
//! [`JsonValue`]: code_runtime::JsonValue

mod approver;
mod bell;
mod conversion;
mod driver;
mod event;
mod executor;
mod namespace;
mod outcome;
mod reply;
mod runtime;

use pyo3::prelude::*;

pyo3::create_exception!(
    _native,
    ContractError,
    pyo3::exceptions::PyValueError,
    "Misuse of the contract: an invalid namespace, function name, schema, limit or configuration, a per-run limit above the runtime's, a checkpoint that does not verify, or a closed runtime."
);

/// The Python exception for a contract misuse of the Rust side.
pub(crate) fn contract_error(error: impl ToString) -> PyErr {
    ContractError::new_err(error.to_string())
}

#[pymodule]
mod _native {
    #[pymodule_export]
    use super::ContractError;
    #[pymodule_export]
    use super::driver::RunDriver;
    #[pymodule_export]
    use super::namespace::NativeNamespace;
    #[pymodule_export]
    use super::reply::{CallReply, DecisionReply};
    #[pymodule_export]
    use super::runtime::{NativeRuntime, describe};

    use pyo3::prelude::*;

    /// Stops the executor and the reactor, joining their threads (the package registers it with
    /// `atexit`). Runs still going are dropped, their substrates torn down.
    #[pyfunction]
    fn shutdown(py: Python<'_>) {
        py.detach(super::executor::shutdown);
    }

    /// Every budget, `(name, default)`, in the order the core declares them: the fields of the
    /// package's `Limits` (a test holds them equal).
    #[pyfunction]
    fn budgets() -> Vec<(&'static str, u64)> {
        code_runtime::Budget::ALL.map(|budget| (budget.name(), budget.default_value())).to_vec()
    }
}

//! [`NativeRuntime`]: one provider (TypeScript on V8, or CPython) behind the package's `Runtime`;
//! [`describe`]. Each run is a [`RunDriver`] the caller's event loop polls.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runtime::{
    Approvals, AsLanguage, Budget, Checkpoint, CheckpointKey, CodeBindingNamespace, CodeRunRequest,
    CodeRuntime, ContractError, Decision, Decisions, DirectorySessionStore, Isolation, Language,
    Limits, RunLimits, SessionId, Sessions, binding,
};
use code_runtime_providers::{ProviderSpec, PythonSetup};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio_util::sync::CancellationToken;

use crate::approver::PythonApprover;
use crate::driver::{RunDriver, RunFuture};
use crate::namespace::NativeNamespace;
use crate::{contract_error, conversion, event, executor};

/// A provider for one language, with the key that signs its runs' checkpoints.
#[pyclass(frozen, module = "code_runtime._native")]
pub(crate) struct NativeRuntime {
    runtime: Arc<dyn CodeRuntime>,
    checkpoint_key: Option<CheckpointKey>,
    /// Python's: the interpreter's virtual environment's distributions, `(name, version)`.
    packages: Vec<(String, String)>,
    /// Where its runs' sessions are kept, when not in the provider's memory.
    sessions: Option<Sessions>,
}

/// The budgets a dict sets, by [`Budget::name`] (the package's `Limits` spells them so); a name
/// no budget has or a value that is not a non-negative integer is misuse.
fn limit_values(limits: Option<&Bound<'_, PyDict>>) -> PyResult<RunLimits> {
    let mut values = RunLimits::default();
    let Some(limits) = limits else { return Ok(values) };
    for (key, value) in limits.iter() {
        let key: String = key.extract().map_err(|_| contract_error("limit names are str"))?;
        let Some(budget) = Budget::ALL.into_iter().find(|budget| budget.name() == key) else {
            let names: Vec<&str> = Budget::ALL.map(Budget::name).to_vec();
            return Err(contract_error(format!(
                "unknown limit {key:?} (the limits are {})",
                names.join(", ")
            )));
        };
        if value.is_none() {
            continue;
        }
        let value: u64 = value
            .extract()
            .map_err(|_| contract_error(format!("limit {key} must be a non-negative int")))?;
        *budget.request_slot(&mut values) = Some(value);
    }
    Ok(values)
}

/// The provider's limits: the defaults, with the dict's values in place.
fn provider_limits(limits: Option<&Bound<'_, PyDict>>) -> PyResult<Limits> {
    let limits = Limits::default().overridden(&limit_values(limits)?);
    limits.validate().map_err(contract_error)?;
    Ok(limits)
}

fn limits_dict<'py>(py: Python<'py>, limits: &Limits) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for budget in Budget::ALL {
        dict.set_item(budget.name(), budget.of(limits))?;
    }
    Ok(dict)
}

/// A provider, and (Python's) the packages of its interpreter's virtual environment.
type Started = (Arc<dyn CodeRuntime>, Vec<(String, String)>);

/// The provider `spec` names: a spec no provider serves and invalid settings are the caller's
/// [`ContractError`](crate::contract_error); what this machine cannot give is a `RuntimeError`.
fn start(spec: &ProviderSpec) -> PyResult<Started> {
    // The package's `Runtime` finds its installed `code-runtime` command for the cells; this
    // process (an interpreter) serves none.
    if spec.language == Language::TypeScript
        && spec.isolation() == Isolation::Process
        && spec.cell_executable.is_none()
    {
        return Err(contract_error(
            "TypeScript with process isolation needs the `code-runtime` executable that \
             serves V8 cells (cell_executable); it is installed with this package",
        ));
    }
    match spec.build() {
        Ok(built) => Ok((built.runtime, built.python_packages)),
        Err(error) if error.is_invalid() => Err(contract_error(error.to_string())),
        Err(error) => Err(PyRuntimeError::new_err(error.to_string())),
    }
}

#[pymethods]
impl NativeRuntime {
    #[new]
    #[pyo3(signature = (language, *, isolation = None, limits = None, cell_executable = None, interpreter = None, preload = Vec::new(), warm = true, checkpoint_key = None, legacy_decorators = false, sessions = None))]
    #[expect(clippy::too_many_arguments, reason = "keyword arguments of a Python constructor")]
    fn new(
        py: Python<'_>,
        language: &str,
        isolation: Option<String>,
        limits: Option<&Bound<'_, PyDict>>,
        cell_executable: Option<PathBuf>,
        interpreter: Option<PathBuf>,
        preload: Vec<String>,
        warm: bool,
        checkpoint_key: Option<Vec<u8>>,
        legacy_decorators: bool,
        sessions: Option<PathBuf>,
    ) -> PyResult<Self> {
        let language = language.as_language().map_err(contract_error)?;
        let checkpoint_key =
            checkpoint_key.map(CheckpointKey::new).transpose().map_err(contract_error)?;
        // A directory's sessions are signed with the checkpoint key, or with a key of their
        // own kept in the directory.
        let sessions = sessions
            .map(|dir| match &checkpoint_key {
                Some(key) => DirectorySessionStore::open(dir, key.clone()),
                None => DirectorySessionStore::open_with_own_key(dir),
            })
            .transpose()
            .map_err(contract_error)?
            .map(Sessions::new);
        let isolation =
            isolation.map(|name| name.parse::<Isolation>()).transpose().map_err(|unknown| {
                contract_error(format!(
                    "isolation must be \"process\" or \"thread\", not {:?}",
                    unknown.0
                ))
            })?;
        let spec = ProviderSpec {
            isolation,
            limits: provider_limits(limits)?,
            python: PythonSetup { interpreter, preload },
            cell_executable,
            legacy_decorators,
            warm,
            ..ProviderSpec::new(language)
        };
        // Starting may start a cell and wait for it: not with the GIL held.
        let (runtime, packages) = py.detach(|| start(&spec))?;
        Ok(Self { runtime, checkpoint_key, packages, sessions })
    }

    /// Python's: what its interpreter's virtual environment holds, `(name, version)` sorted by
    /// name; empty otherwise.
    #[getter]
    fn packages(&self) -> Vec<(String, String)> {
        self.packages.clone()
    }

    /// `"typescript"` or `"python"`.
    #[getter]
    fn language(&self) -> &'static str {
        self.runtime.language().as_str()
    }

    /// `"worker-thread"` or `"process"`.
    #[getter]
    fn isolation(&self) -> &'static str {
        self.runtime.isolation().as_str()
    }

    /// Every run's budgets.
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        limits_dict(py, self.runtime.limits())
    }

    /// A run of `code`, to be polled on the caller's event loop ([`RunDriver`]); `done(outcome)`
    /// is called once, on that loop's thread, with the outcome tuple the package turns into a
    /// `RunResult` or a `ContractError`.
    #[pyo3(signature = (code, namespaces, done, *, values = None, limits = None, call_tool = false, on_event = None, approver = None, approval_timeout_ms = None, resume = None, truncate = None, session = None))]
    #[expect(clippy::too_many_arguments, reason = "keyword arguments of a Python method")]
    fn run(
        &self,
        code: String,
        namespaces: Vec<(Bound<'_, NativeNamespace>, Py<PyAny>)>,
        done: Py<PyAny>,
        values: Option<&Bound<'_, PyDict>>,
        limits: Option<&Bound<'_, PyDict>>,
        call_tool: bool,
        on_event: Option<Py<PyAny>>,
        approver: Option<Py<PyAny>>,
        approval_timeout_ms: Option<u64>,
        resume: Option<(Vec<u8>, Bound<'_, PyDict>)>,
        truncate: Option<usize>,
        session: Option<(String, String)>,
    ) -> PyResult<RunDriver> {
        let mut request = CodeRunRequest::new(code);
        request.truncate = truncate;
        if let Some((name, owner)) = session {
            request = request.session(SessionId::new(name).owned_by(owner));
        }
        // A resume of a run that paused in a session finds it where this runtime keeps them.
        request.sessions = self.sessions.clone();
        request.bindings = namespaces
            .into_iter()
            .map(|(namespace, invoke)| namespace.get().bound(invoke))
            .collect();
        if let Some(values) = values {
            for (name, value) in values.iter() {
                let name: String =
                    name.extract().map_err(|_| contract_error("value names are str"))?;
                let value = conversion::from_python(&value)
                    .map_err(|why| contract_error(format!("value {name}: {why}")))?;
                request = request.value(name, value);
            }
        }
        request = request.limits(limit_values(limits)?);
        if call_tool {
            request = request.call_tool();
        }
        if let Some(deliver) = on_event {
            request = request.events(event::sink(deliver));
        }
        if let Some(approvals) = self.approvals(approver, approval_timeout_ms, resume.is_some()) {
            request = request.approvals(approvals);
        }
        if let Some((checkpoint, decisions)) = resume {
            let resumed =
                CodeRunRequest::resuming(checkpoint_from(&checkpoint)?, decided(&decisions)?);
            request.resume = resumed.resume;
        }
        let token = CancellationToken::new();
        request = request.signal(token.clone());
        let runtime = self.runtime.clone();
        let future: RunFuture = Box::pin(async move { runtime.run(request).await });
        RunDriver::new(future, done, token).map_err(|error| {
            PyRuntimeError::new_err(format!("cannot make the run's eventfd: {error}"))
        })
    }

    /// Disposes the provider, then calls `done()` from another thread. Runs still going end as
    /// `abort`; later runs are a `ContractError`.
    fn close(&self, done: Py<PyAny>) -> PyResult<()> {
        let executor = executor::handle().map_err(|error| {
            PyRuntimeError::new_err(format!("cannot start the executor: {error}"))
        })?;
        let runtime = self.runtime.clone();
        executor.spawn(async move {
            runtime.dispose().await;
            Python::try_attach(|py| {
                if let Err(error) = done.call0(py) {
                    error.write_unraisable(py, None);
                }
            });
        });
        Ok(())
    }

    /// The seconds one run of `program` takes on this provider from the Rust host: polled by a
    /// tokio `block_on` (as `code-runtime bench` polls its runs) with a Rust `tools.echo` that
    /// returns its argument. `python -m code_runtime.bench` measures it beside each of its own
    /// runs, so the two share the machine's moment, not only its day. A run that fails raises.
    fn rust_host_seconds(&self, py: Python<'_>, program: String) -> PyResult<f64> {
        let executor = executor::handle().map_err(|error| {
            PyRuntimeError::new_err(format!("cannot start the executor: {error}"))
        })?;
        let runtime = self.runtime.clone();
        let echo = CodeBindingNamespace::new("tools")
            .function("echo", binding(|args| async move { Ok(args.into()) }));
        let (elapsed, result) = py.detach(move || {
            executor.block_on(async move {
                let started = Instant::now();
                let result = runtime.run(CodeRunRequest::new(program).binding(echo)).await;
                (started.elapsed(), result)
            })
        });
        match result {
            Ok(result) if result.is_ok() => Ok(elapsed.as_secs_f64()),
            Ok(result) => {
                Err(PyRuntimeError::new_err(format!("the run failed: {:?}", result.error())))
            }
            Err(error) => Err(contract_error(error)),
        }
    }

    /// Disposes the provider and waits for it, the GIL released (for `atexit` and `with`).
    fn close_blocking(&self, py: Python<'_>) -> PyResult<()> {
        let executor = executor::handle().map_err(|error| {
            PyRuntimeError::new_err(format!("cannot start the executor: {error}"))
        })?;
        let runtime = self.runtime.clone();
        py.detach(move || executor.block_on(runtime.dispose()));
        Ok(())
    }
}

impl NativeRuntime {
    /// The approvals of a run: the approver's, or for a resume without one, a policy that
    /// denies what still needs a decision (the checkpoint must still verify under the key).
    fn approvals(
        &self,
        approver: Option<Py<PyAny>>,
        timeout_ms: Option<u64>,
        resuming: bool,
    ) -> Option<Approvals> {
        let mut approvals = match approver {
            Some(decide) => Approvals::new(PythonApprover { decide }),
            None if resuming => Approvals::new(Decision::deny("no approver")),
            None => return None,
        };
        if let Some(key) = &self.checkpoint_key {
            approvals = approvals.checkpoint_key(key.clone());
        }
        if let Some(timeout) = timeout_ms {
            approvals = approvals.timeout(Duration::from_millis(timeout));
        }
        Some(approvals)
    }
}

fn checkpoint_from(bytes: &[u8]) -> PyResult<Checkpoint> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        contract_error("code-runtime: the checkpoint is not a checkpoint (not UTF-8)")
    })?;
    Checkpoint::from_json(text).map_err(|error| contract_error(ContractError::from(error)))
}

/// `{call: None}` allows a call, `{call: "reason"}` denies it.
fn decided(decisions: &Bound<'_, PyDict>) -> PyResult<Decisions> {
    let mut out = Decisions::new();
    for (call, decision) in decisions.iter() {
        let call: u64 =
            call.extract().map_err(|_| contract_error("decisions are keyed by call number"))?;
        out = match decision.extract::<Option<String>>() {
            Ok(None) => out.allow(call),
            Ok(Some(reason)) => out.deny(call, reason),
            Err(_) => return Err(contract_error("a decision is None (allow) or a reason (deny)")),
        };
    }
    Ok(out)
}

/// What the model should read about `namespaces` in `language` (TypeScript declarations or
/// Python stubs).
#[pyfunction]
pub(crate) fn describe(
    namespaces: Vec<Bound<'_, NativeNamespace>>,
    language: &str,
) -> PyResult<String> {
    let namespaces: Vec<_> =
        namespaces.iter().map(|namespace| namespace.get().namespace()).collect();
    code_runtime::describe(&namespaces, language).map_err(contract_error)
}

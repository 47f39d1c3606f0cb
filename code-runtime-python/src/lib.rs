//! The Python provider of code-runtime: a fresh `python3` per run, in a sandbox cell of its own
//! (`code-runtime-sandbox`), driven over JSON-lines frames on fd 3.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use code_runtime::{binding, CodeBindingNamespace, CodeRunRequest, CodeRuntime};
//! use code_runtime_python::{PythonCodeRuntime, PythonConfig};
//! use code_runtime::json;
//!
//! // Probes the interpreter on a thread of its own (or reads the probe cached by an earlier
//! // process), so an async host is not blocked.
//! let runtime = PythonCodeRuntime::start(PythonConfig::default()).await?;
//! let tools = CodeBindingNamespace::new("tools")
//!     .function("search", binding(|args| async move { Ok(json!({ "hits": [args["q"]] })) }));
//! let program = "r = await tools.search(q='rust')\nprint(len(r['hits']))\nreturn r['hits']";
//! let result = runtime.run(CodeRunRequest::new(program).binding(tools)).await?;
//! assert_eq!(result.to_json(), r#"{"logs":["1"],"value":["rust"]}"#);
//! runtime.dispose().await;
//! # Ok(()) }
//! ```
//!
//! ## What a program sees
//!
//! The program is the body of an `async def` run in a fresh globals dict holding only
//! `__builtins__`, `__name__`, one object per binding namespace and the declared error classes.
//! Bindings are awaited with one JSON argument, or keyword arguments that become one JSON object:
//! `await tools.search({"q": "x"})`, `await tools.search(q="x")`, `await tools.list()` (`None`),
//! or `await tools["my-tool"]({})` for any name. A rejection is an instance of the namespace's
//! error class (or `Exception`) whose `data` attribute holds the host's structured data (or
//! `None`). `print`, `sys.stdout` and `sys.stderr` become log entries, one per line; raw writes to
//! fd 1 and 2 are captured by the host too. Returning `None` (or nothing) means "no value". The
//! whole standard library is importable; `asyncio` works when the program imports it (it is loaded
//! only then, as it costs several interpreter starts).
//!
//! ## Limits and caveats
//!
//! - Containment is the operating system's, not Python's: every run is a cell of
//!   `code-runtime-sandbox` (user, pid, mount, network, ipc and uts namespaces, Landlock, seccomp,
//!   no privileges, rlimits), in which the program sees a minimal read-only root (the
//!   interpreter's files, shared libraries, a few devices), its own `/proc`, a private `/tmp` the
//!   size of the memory budget holding a fresh work directory, an empty environment, no network,
//!   and nothing of the host; nothing it starts outlives the run.
//!   [`containment`](PythonCodeRuntime::containment) says which layers hold on this machine;
//!   with `sandbox.require` (the default) construction fails when one asked for does not.
//!   docs/security.md is the threat model.
//! - A cell is made for each run, or ahead of it ([`PythonConfig::warm_cell`], the default: a
//!   run under the provider's limits then finds its interpreter loaded and waiting). No cell
//!   serves two runs. Cells are forked from a zygote ([`PythonConfig::zygote`], the default): an
//!   interpreter started once per provider in a cell of its own, whose forks enter namespaces of
//!   their own and apply every layer before the program's first byte (a few milliseconds and
//!   under a megabyte each, instead of an interpreter's start); where the machine does not give
//!   what it needs, cells start from scratch ([`Containment::zygote`] says which).
//! - `compute_ms` is the CPU time of every process of the run, the interpreter's (read at
//!   nanosecond precision) and its children's, polled as the budget nears its end; memory is
//!   bounded per process (`RLIMIT_AS`) and for the whole cell (its resident memory and its
//!   `/tmp`, polled every 10 ms).
//! - A memory allocation the budget cannot hold is a `MemoryError` the program may catch.
//! - Cells are cloned by one long-lived thread of the sandbox crate, so a run does not depend on
//!   which host thread polls it. A cell's processes are children of the host process: a host
//!   that reaps *any* child (`waitpid(-1)`) would steal their statuses. The host process must
//!   ignore `SIGPIPE` (Rust binaries do): a cell that dies while the host writes to it would
//!   otherwise end the host.
//! - Values nest up to about 20 000 levels inside Python (its JSON scanner recurses); the host
//!   side has no depth limit.
#![warn(missing_docs)]

mod cell;
mod command;
mod config;
mod frame;
mod pipe;
mod probe;
mod session_frame;
mod substrate;
mod warm;

use std::path::PathBuf;

use code_runtime::provider::{Ending, Host, Hosted, Provider, Start};
use code_runtime::{CodeRuntime, ConfigError, Isolation, Language};

pub use code_runtime_sandbox::{Containment, Options as SandboxOptions, SandboxError};

pub use crate::config::{DEFAULT_MAX_PROCESSES, ProbeCache, PythonConfig, STANDARD_PRELOAD};

/// Why a [`PythonCodeRuntime`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PythonError {
    /// An invalid setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The interpreter cannot run programs: it is missing, too old, or does not start in its
    /// sandbox cell.
    #[error("code-runtime-python: the interpreter {} cannot run programs: {why}", interpreter.display())]
    Interpreter {
        /// The interpreter as configured.
        interpreter: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// The probe's thread could not be started ([`PythonCodeRuntime::start`]).
    #[error("code-runtime-python: cannot start the interpreter probe: {0}")]
    Probe(String),
    /// The sandbox cannot be had: a layer `sandbox.require` asks for does not hold on this
    /// machine (the message says which, why, and what to do), or a path cannot be granted.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// A [`CodeRuntime`] that runs Python programs, one fresh `python3` per run in a sandbox cell.
#[derive(Debug)]
pub struct PythonCodeRuntime {
    host: Host<PythonProvider>,
}

/// What [`PythonCodeRuntime`]'s host runs: each run's cell, the warm one when it fits.
#[derive(Debug)]
struct PythonProvider {
    warm: warm::WarmCell,
}

impl PythonCodeRuntime {
    /// Validates `config`, probes the interpreter (resolves it to its real executable, lists the
    /// files it reads, compiles the bootstrap with it, and checks that it starts in a sandbox
    /// cell under the memory budget) and plans the cells of its runs. The probe is remembered
    /// ([`PythonConfig::probe_cache`]), so this costs a file read after the first time; otherwise
    /// it blocks for a few hundred milliseconds (see [`start`](Self::start) for async hosts).
    /// The first construction in a process also learns which sandbox layers the machine gives,
    /// by starting a few trial cells (milliseconds).
    ///
    /// # Errors
    ///
    /// [`PythonError::Config`] for invalid limits or a frame limit below the output budget,
    /// [`PythonError::Interpreter`] for an interpreter that cannot be found, is older than 3.9,
    /// or does not start in its cell under the memory limit, [`PythonError::Sandbox`] for a
    /// sandbox layer required but missing.
    pub fn new(config: PythonConfig) -> Result<Self, PythonError> {
        config.validate()?;
        let (limits, max_concurrent_runs) = (config.limits, config.max_concurrent_runs);
        let probe = probe::probe(&config, cell::PythonCell::check)?;
        let cell = cell::PythonCell::new(&probe, &config)?;
        let launcher = warm::Launcher::new(config, probe, cell);
        let warm = warm::WarmCell::new(std::sync::Arc::new(launcher));
        let host = Host::new(PythonProvider { warm }, limits, max_concurrent_runs)?;
        Ok(Self { host })
    }

    /// [`new`](Self::new) on a thread of its own, so an async host's executor is not blocked by
    /// the probe. Works under any executor.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub async fn start(config: PythonConfig) -> Result<Self, PythonError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("code-runtime-python-probe".to_owned())
            .spawn(move || {
                let _ = reply.send(Self::new(config));
            })
            .map_err(|error| PythonError::Probe(error.to_string()))?;
        answer.await.map_err(|_| PythonError::Probe("the probe thread panicked".to_owned()))?
    }

    /// The interpreter every run starts (the real executable behind the configured one).
    pub fn executable(&self) -> &std::path::Path {
        &self.host.provider().warm.launcher().probe().executable
    }

    /// The distributions of the interpreter's virtual environment, `(name, version)` sorted by
    /// name: what a program can import beyond the standard library (and [`PythonConfig::preload`]
    /// has imported already). Empty for an interpreter that is not a virtual environment's.
    pub fn packages(&self) -> &[(String, String)] {
        &self.host.provider().warm.launcher().probe().packages
    }

    /// The layers of the sandbox that hold for every run on this machine.
    pub fn containment(&self) -> Containment {
        self.host.provider().warm.launcher().containment()
    }

    /// The host pid of the init of the zygote's cell while runs fork from one (see
    /// [`PythonConfig::zygote`]): for a host's diagnostics. Killing it ends the runs forked from
    /// it; the next run starts a new one.
    pub fn zygote_pid(&self) -> Option<libc::pid_t> {
        self.host.provider().warm.launcher().zygote_pid()
    }

    /// Whether construction read the probe from the cache instead of starting the interpreter.
    pub fn probe_was_cached(&self) -> bool {
        self.host.provider().warm.launcher().probe().cached
    }

    /// The configuration in force.
    pub fn config(&self) -> &PythonConfig {
        self.host.provider().warm.launcher().config()
    }
}

impl Hosted for PythonCodeRuntime {
    fn runtime(&self) -> &dyn CodeRuntime {
        &self.host
    }
}

impl Provider for PythonProvider {
    type Substrate = substrate::ChildSubstrate;

    fn language(&self) -> Language {
        Language::Python
    }

    fn isolation(&self) -> Isolation {
        Isolation::Process
    }

    fn carries_sessions(&self) -> bool {
        true
    }

    /// A fresh cell for the run: the warm one when it fits.
    ///
    /// Cancel safety: dropping a run kills its cell at once; it is reaped on the provider's
    /// reactor, which disposal waits for.
    async fn start(&self, start: Start) -> Result<substrate::ChildSubstrate, Ending> {
        let launched = self.warm.take(&start.limits).await?;
        Ok(substrate::run(launched, self.warm.launcher().config(), start))
    }

    async fn close(&self) {
        self.warm.close().await;
    }
}

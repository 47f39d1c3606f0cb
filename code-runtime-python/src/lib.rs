//! The Python provider of code-runtime: a fresh, contained `python3` child per run, driven over
//! JSON-lines frames on fd 3.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use code_runtime::{binding, CodeBindingNamespace, CodeRunRequest, CodeRuntime};
//! use code_runtime_python::{PythonCodeRuntime, PythonConfig};
//! use serde_json::json;
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
//! - Containment is the operating system's, not Python's: an empty environment, stdin from
//!   `/dev/null`, a fresh private working directory, fds other than 0-3 closed, its own session,
//!   a parent-death signal, `RLIMIT_AS` from `max_memory_mb`, core dumps off, `RLIMIT_CPU` as a
//!   backstop, and nothing the program starts survives the run ([`Containment`] says how). The
//!   program can still read what the host's user can read, open network connections, and see the
//!   host's process list in `/proc`: run the host under a dedicated user or a container when that
//!   matters.
//! - `compute_ms` is the worker process's CPU time (all its threads), polled at millisecond
//!   precision; processes the program forks are not counted, but do not survive the run.
//! - A memory allocation the budget cannot hold is a `MemoryError` the program may catch.
//! - Children are forked by one long-lived thread of this crate, so a run does not depend on
//!   which host thread polls it. The host process must ignore `SIGPIPE` (Rust binaries do): a
//!   child that dies while the host writes to it would otherwise end the host.
//! - Values nest up to about 20 000 levels inside Python (its JSON scanner recurses); the host
//!   side has no depth limit.
#![warn(missing_docs)]

pub mod codec;
mod command;
mod config;
pub mod frame;
mod pipe;
mod probe;
mod spawner;
mod substrate;

use std::path::PathBuf;

use code_runtime::provider::{Host, async_trait};
use code_runtime::{
    CodeRunRequest, CodeRunResult, CodeRuntime, ConfigError, ContractError, Limits,
};

pub use crate::config::{ProbeCache, PythonConfig};

/// The frame protocol's channel: the child's fd 3.
pub const PROTOCOL_FD: i32 = 3;

/// The child bootstrap, embedded in the binary and compiled by the interpreter once.
pub const BOOTSTRAP: &str = command::BOOTSTRAP;

/// How a run's descendants are kept from outliving it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Containment {
    /// Each run is its own PID namespace; the kernel ends every process in it with the worker.
    PidNamespace,
    /// No PID namespace could be created (no CAP_SYS_ADMIN): the supervisor is a child subreaper
    /// and kills what is re-parented to it. A process that escapes both (for example one that a
    /// non-descendant started on the program's behalf) is not covered.
    SubreaperSweep,
}

/// Why a [`PythonCodeRuntime`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PythonError {
    /// An invalid setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The interpreter cannot run programs: it is missing, too old, or does not start contained.
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
}

/// A [`CodeRuntime`] that runs Python programs, one fresh contained `python3` process per run.
#[derive(Debug)]
pub struct PythonCodeRuntime {
    config: PythonConfig,
    probe: probe::Probe,
    host: Host,
}

impl PythonCodeRuntime {
    /// Validates `config` and probes the interpreter: resolves it to its real executable, checks
    /// that it starts contained, and compiles the bootstrap with it. The probe is remembered
    /// ([`PythonConfig::probe_cache`]), so this costs a file read after the first time; otherwise
    /// it blocks for a few hundred milliseconds (see [`start`](Self::start) for async hosts).
    ///
    /// # Errors
    ///
    /// [`PythonError::Config`] for invalid limits or a frame limit below the output budget,
    /// [`PythonError::Interpreter`] for an interpreter that cannot be found, is older than 3.9,
    /// or does not start under the memory limit.
    pub fn new(config: PythonConfig) -> Result<Self, PythonError> {
        config.validate()?;
        let host = Host::new(config.limits, config.max_concurrent_runs)?;
        let rlimits = command::Rlimits::of(&config.limits, config.pid_namespace);
        let probe = probe::probe(&config.interpreter, rlimits, &config.probe_cache)?;
        Ok(Self { config, probe, host })
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
        &self.probe.executable
    }

    /// How runs are kept from leaving processes behind on this machine.
    pub fn containment(&self) -> Containment {
        self.probe.containment
    }

    /// Whether construction read the probe from the cache instead of starting the interpreter.
    pub fn probe_was_cached(&self) -> bool {
        self.probe.cached
    }

    /// The configuration in force.
    pub fn config(&self) -> &PythonConfig {
        &self.config
    }
}

#[async_trait]
impl CodeRuntime for PythonCodeRuntime {
    fn language(&self) -> &str {
        "python"
    }

    fn isolation(&self) -> &str {
        "process"
    }

    fn limits(&self) -> &Limits {
        self.host.limits()
    }

    /// Runs one program in a fresh child.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future kills the child at once; it is reaped and its working directory
    /// removed on the provider's reactor, which [`dispose`](CodeRuntime::dispose) waits for.
    async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError> {
        self.host.run(request, |start| substrate::start(&self.config, &self.probe, start)).await
    }

    async fn dispose(&self) {
        self.host.dispose().await;
    }
}

//! The Python provider of code-runtime: a fresh, contained `python3` child per run, driven over
//! JSON-lines frames on fd 3.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use code_runtime::{binding, CodeBindingNamespace, CodeRunRequest, CodeRuntime, RunGate};
//! use code_runtime_python::{PythonCodeRuntime, PythonConfig};
//! use serde_json::json;
//!
//! let runtime = PythonCodeRuntime::new(PythonConfig::default())?;
//! let tools = CodeBindingNamespace::new("tools")
//!     .function("search", binding(|args| async move { Ok(json!({ "hits": [args["q"]] })) }));
//! let program = "r = await tools.search({'q': 'rust'})\nprint(len(r['hits']))\nreturn r['hits']";
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
//! Bindings are awaited with one JSON argument: `await tools.search({"q": "x"})`, or
//! `await tools["my-tool"]({})` for any name. `print`, `sys.stdout` and `sys.stderr` become log
//! entries, one per line; raw writes to fd 1 and 2 are captured by the host too. Returning `None`
//! (or nothing) means "no value". The whole standard library is importable; `asyncio` works when the
//! program imports it (it is loaded only then, as it costs several interpreter starts).
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
//! - The parent-death signal follows the host *thread* that spawned the child: if that thread exits
//!   while the run is live, the child is killed.
//! - Values nest up to about 20 000 levels inside Python (its JSON scanner recurses); the host side
//!   has no depth limit.
#![warn(missing_docs)]

pub mod codec;
mod command;
mod config;
mod driver;
pub mod frame;

use std::sync::Arc;

use code_runtime::{
    CodeRunRequest, CodeRunResult, CodeRuntime, ConfigError, ContractError, RunGate, async_trait,
};

pub use crate::command::Containment;
pub use crate::config::PythonConfig;

/// The frame protocol's channel: the child's fd 3.
pub const PROTOCOL_FD: i32 = 3;

/// The child bootstrap, embedded in the binary and run with `python3 -c`.
pub const BOOTSTRAP: &str = command::BOOTSTRAP;

/// A [`CodeRuntime`] that runs Python programs, one fresh contained `python3` process per run.
///
/// Cheap to share (`Arc` inside); construction runs the interpreter once to resolve and check it.
#[derive(Clone, Debug)]
pub struct PythonCodeRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: driver::Shared,
    containment: Containment,
    gate: RunGate,
}

impl PythonCodeRuntime {
    /// Validates `config` and resolves the interpreter by starting it once, contained as runs are.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for invalid limits, a frame limit below the output budget, or an
    /// interpreter that cannot be found, is older than 3.9, or does not start under the memory limit.
    pub fn new(config: PythonConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let rlimits = command::Rlimits {
            address_space: config.limits.max_memory_mb.saturating_mul(1 << 20),
            cpu_seconds: config.limits.compute_ms.div_ceil(1000) + 1,
            pid_namespace: config.pid_namespace,
        };
        let probe = command::probe(&config.interpreter, rlimits)?;
        let gate = RunGate::new();
        let shared = driver::Shared {
            config,
            executable: probe.executable,
            bootstrap: probe.bootstrap,
            disposed: gate.disposed().clone(),
        };
        Ok(Self { inner: Arc::new(Inner { shared, containment: probe.containment, gate }) })
    }

    /// The interpreter every run starts (`sys.executable` of the configured one).
    pub fn executable(&self) -> &std::path::Path {
        &self.inner.shared.executable
    }

    /// How runs are kept from leaving processes behind on this machine.
    pub fn containment(&self) -> Containment {
        self.inner.containment
    }

    /// The configuration in force.
    pub fn config(&self) -> &PythonConfig {
        &self.inner.shared.config
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

    /// Runs one program in a fresh child.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future kills the child at once; it is reaped and its working directory removed
    /// on a background task, which [`dispose`](CodeRuntime::dispose) waits for.
    async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError> {
        let inner = &self.inner;
        let permit = inner.gate.enter()?;
        if let Some(settled) = request.preflight(&inner.shared.config.limits)? {
            return Ok(settled);
        }
        Ok(driver::run(&inner.shared, request, permit).await)
    }

    async fn dispose(&self) {
        self.inner.gate.dispose().await;
    }
}

//! The TypeScript provider of code-runtime: a fresh V8 isolate per run on its own OS thread,
//! type-stripped TypeScript, hard budgets.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use code_runtime::{binding, CodeBindingNamespace, CodeRunRequest, CodeRuntime, RunGate};
//! use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};
//! use serde_json::json;
//!
//! let runtime = WorkerThreadCodeRuntime::new(WorkerThreadConfig::default())?;
//! let tools = CodeBindingNamespace::new("tools")
//!     .function("search", binding(|args| async move { Ok(json!({ "hits": [args["q"]] })) }));
//! let program = "const r: { hits: string[] } = await tools.search({ q: 'rust' });\nconsole.log(r.hits.length);\nreturn r.hits;";
//! let result = runtime.run(CodeRunRequest::new(program).binding(tools)).await?;
//! assert_eq!(result.to_json(), r#"{"logs":["1"],"value":["rust"]}"#);
//! # Ok(()) }
//! ```
//!
//! ## What a program sees
//!
//! ECMAScript built-ins, one object per binding namespace (its members are native functions that
//! return promises), the declared error classes (real `Error` subclasses), `console` (`log`,
//! `info`, `warn`, `error`, `debug`) and `setTimeout` / `clearTimeout`. No Node or Deno API, no
//! network, no filesystem, no `process`. `eval`, `new Function` and WebAssembly compilation are
//! refused unless the configuration allows them.
//!
//! ## Limits and caveats
//!
//! - `compute_ms` is the CPU time of the isolate's thread: awaiting a binding costs nothing, a hot
//!   loop always accrues. The host samples it, so a run can overshoot by about a millisecond.
//! - `max_memory_mb` bounds V8's heap and the ArrayBuffer backing stores together (the heap's size
//!   is sampled between turns of the event loop). Running out of heap ends the run as
//!   `worker-exit`; an ArrayBuffer the budget cannot hold is a `RangeError` the program sees.
//! - An isolate is never reused: every run creates one from a startup snapshot made once per
//!   process (a trivial run costs about 1.5 ms in all on a 2-core machine).
#![warn(missing_docs)]

mod bridge;
mod config;
mod convert;
mod driver;
mod isolate;
mod platform;
mod strip;
mod termination;

use std::sync::Arc;

use code_runtime::{
    CodeRunRequest, CodeRunResult, CodeRuntime, ConfigError, ContractError, RunGate, async_trait,
};

pub use crate::config::WorkerThreadConfig;

/// A [`CodeRuntime`] that runs TypeScript programs, each in a fresh V8 isolate on its own thread.
#[derive(Clone, Debug)]
pub struct WorkerThreadCodeRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: driver::Shared,
    gate: RunGate,
}

impl WorkerThreadCodeRuntime {
    /// Validates `config`. V8 itself is initialised once per process, with the first run.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for invalid limits.
    pub fn new(config: WorkerThreadConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let gate = RunGate::new();
        let shared = driver::Shared { config, disposed: gate.disposed().clone() };
        Ok(Self { inner: Arc::new(Inner { shared, gate }) })
    }

    /// The configuration in force.
    pub fn config(&self) -> &WorkerThreadConfig {
        &self.inner.shared.config
    }
}

#[async_trait]
impl CodeRuntime for WorkerThreadCodeRuntime {
    fn language(&self) -> &str {
        "typescript"
    }

    fn isolation(&self) -> &str {
        "worker-thread"
    }

    /// Runs one program in a fresh isolate.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future terminates the isolate at once; its thread is joined in the
    /// background, which [`dispose`](CodeRuntime::dispose) waits for.
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

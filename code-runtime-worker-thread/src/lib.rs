//! The TypeScript provider of code-runtime: a fresh V8 isolate per run on its own OS thread,
//! type-stripped TypeScript, hard budgets.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use code_runtime::{binding, CodeBindingNamespace, CodeRunRequest, CodeRuntime};
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
//! return promises; a call takes one JSON argument, none means `null`, more is a `TypeError`), the
//! declared error classes (real `Error` subclasses; a rejection carries the host's `data` as
//! `e.data`), `console` (`log`, `info`, `warn`, `error`, `debug`) and `setTimeout` /
//! `clearTimeout`. No Node or Deno API, no network, no filesystem, no `process`. `eval`,
//! `new Function` are refused, and `WebAssembly` is absent, unless the configuration allows them.
//! The program is the body of an async function, compiled as a function body in strict mode; a
//! program over 1 MiB is refused.
//!
//! ## Limits and caveats
//!
//! - `compute_ms` is the CPU time of the isolate's thread: awaiting a binding costs nothing, a hot
//!   loop always accrues. The host samples it, so a run can overshoot by about a millisecond.
//! - `max_memory_mb` bounds V8's heap and the ArrayBuffer backing stores together (the heap's size
//!   is sampled between turns of the event loop). A single allocation the budget cannot hold (an
//!   `ArrayBuffer`, a typed array) fails inside the program as a catchable `RangeError`; a program
//!   that fills its heap ends as `worker-exit` (`out of memory`).
//! - An isolate is never reused: every run creates one from a startup snapshot made once per
//!   process (a trivial run costs about 1.5 ms in all on a 2-core machine).
//! - Whatever a program hands the host (a result, a `console` line, a call's argument, a thrown
//!   value's text) is walked iteratively and charged as it is copied: results and lines against
//!   the output budget, arguments and pending calls against the memory budget. The deadlines
//!   hold while it is walked.
//! - Isolates run in this process: a V8 fatal error (a single allocation past the budget and its
//!   one extension, an internal size limit) aborts it. Run untrusted programs where a crash of
//!   the host process is acceptable, or in a process of their own (docs/security.md).
#![warn(missing_docs)]

mod config;
mod convert;
mod globals;
mod isolate;
mod memory;
mod message;
mod meter;
mod platform;
mod render;
mod state;
mod strip;
mod substrate;
mod termination;

use code_runtime::provider::{Host, async_trait};
use code_runtime::{
    CodeRunRequest, CodeRunResult, CodeRuntime, ConfigError, ContractError, Limits,
};

pub use crate::config::WorkerThreadConfig;

/// A [`CodeRuntime`] that runs TypeScript programs, each in a fresh V8 isolate on its own thread.
///
/// Cheap to share behind an `Arc`. V8 itself is initialised once per process, with the first run.
#[derive(Debug)]
pub struct WorkerThreadCodeRuntime {
    config: WorkerThreadConfig,
    host: Host,
}

impl WorkerThreadCodeRuntime {
    /// Validates `config`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for invalid limits or a zero `max_concurrent_runs`.
    pub fn new(config: WorkerThreadConfig) -> Result<Self, ConfigError> {
        let host = Host::new(config.limits, config.max_concurrent_runs)?;
        Ok(Self { config, host })
    }

    /// The configuration in force.
    pub fn config(&self) -> &WorkerThreadConfig {
        &self.config
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

    fn limits(&self) -> &Limits {
        self.host.limits()
    }

    /// Runs one program in a fresh isolate.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future terminates the isolate at once; its thread is joined on the provider's
    /// reactor, which [`dispose`](CodeRuntime::dispose) waits for.
    async fn run(&self, request: CodeRunRequest) -> Result<CodeRunResult, ContractError> {
        self.host.run(request, |start| async { substrate::start(&self.config, start) }).await
    }

    async fn dispose(&self) {
        self.host.dispose().await;
    }
}

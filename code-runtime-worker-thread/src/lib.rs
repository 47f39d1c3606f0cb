//! The TypeScript provider of code-runtime: a fresh V8 isolate per run on its own OS thread,
//! type-stripped TypeScript, hard budgets.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use code_runtime::{binding, CodeBindingNamespace, CodeRunRequest, CodeRuntime};
//! use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};
//! use code_runtime::json;
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
//! ## Where isolates live
//!
//! [`Isolation::Thread`] (the library's default) runs each isolate on a thread of the host's
//! process: the lowest latency, for trusted programs. A V8 fatal error there (an allocation past
//! the budget and the room lent to unwind, an internal size limit such as
//! `"x".repeat(2 ** 28).split("")`) ends the run and abandons its isolate, which keeps what it
//! holds; past 16 of them or 2 GiB, new `thread` runs are refused. An exploit of V8 reaches the
//! host.
//! [`Isolation::Process`] runs each isolate in
//! a sandbox cell of its own (no files, no network, seccomp, Landlock; docs/security.md): a V8
//! fatal error ends that run as `worker-exit`, saying what V8 said, and the next run gets a fresh
//! cell. A cell runs an executable that calls
//! [`serve_cell_if_asked`] first in `main`: the host's own (the default), or a helper such as
//! this crate's `code-runtime-v8-cell` binary ([`WorkerThreadConfig::cell_executable`]).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! code_runtime_worker_thread::serve_cell_if_asked(); // first thing in `main`
//! use code_runtime_worker_thread::{Isolation, WorkerThreadCodeRuntime, WorkerThreadConfig};
//! let config = WorkerThreadConfig { isolation: Isolation::Process, ..WorkerThreadConfig::default() };
//! let runtime = WorkerThreadCodeRuntime::new(config)?;
//! # Ok(()) }
//! ```
//!
//! ## Limits and caveats
//!
//! - `compute_ms` is the CPU time of the isolate's thread (`thread`), or of every thread of the
//!   cell (`process`, V8's own included): awaiting a binding costs nothing, a hot loop always
//!   accrues. The host samples it, so a run can overshoot by about a millisecond.
//! - `max_memory_mb` bounds V8's heap and the ArrayBuffer backing stores together (the heap's size
//!   is sampled between turns of the event loop). A single allocation the budget cannot hold (an
//!   `ArrayBuffer`, a typed array) fails inside the program as a catchable `RangeError`; a program
//!   that fills its heap ends as `worker-exit` (`out of memory`). A cell is also stopped once its
//!   private memory passes the budget plus 96 MiB (V8's own share).
//! - An isolate is never reused: every run gets a fresh one. Two are made ahead of the next runs
//!   ([`WorkerThreadConfig::warm`]), on their threads or in their cells, so a trivial run costs
//!   well under a millisecond in-process and a few milliseconds in a cell on a 2-core machine;
//!   a run under tightened limits makes its own (about 2 ms more).
//! - Whatever a program hands the host (a result, a `console` line, a call's argument, a thrown
//!   value's text) is walked iteratively and charged as it is copied: results and lines against
//!   the output budget, arguments and pending calls against the memory budget. The deadlines
//!   hold while it is walked.
#![warn(missing_docs)]

mod abandonment;
mod builtins;
mod cell;
mod config;
mod convert;
mod crypto;
mod encoding;
mod entropy;
mod globals;
mod imports;
mod isolate;
mod memory;
mod message;
mod meter;
mod native;
mod nesting;
mod platform;
mod process;
mod program;
mod render;
mod replay;
mod shedding;
mod state;
mod strip;
mod substrate;
mod termination;
mod transform;
mod web;
mod wire;

use std::path::PathBuf;
use std::time::Duration;

use code_runtime::provider::{Either, Ending, Host, Hosted, Provider, RunGate, Spare, Start};
use code_runtime::{CodeRuntime, ConfigError, Language};
use code_runtime_cell::CellSubstrate;
use code_runtime_sandbox::{Containment, SandboxError};

pub use crate::cell::serve_cell_if_asked;
pub use crate::config::WorkerThreadConfig;
/// Where a run's isolate lives (the core's [`Isolation`]; see
/// [`WorkerThreadConfig::isolation`]).
#[doc(no_inline)]
pub use code_runtime::Isolation;
pub use code_runtime_sandbox::Options as SandboxOptions;

/// Sets the threads of this process's V8 worker pool (background compilation and garbage
/// collection, shared by every isolate of `thread` isolation), before V8 starts with the first
/// such run or provider; `0`, the default, lets V8 choose from the processors online. Each cell
/// of `process` isolation starts its own V8, single-threaded: no pool, whatever this says. V8
/// lives as long as the process: it cannot be stopped and started again.
///
/// # Errors
///
/// V8 has started already.
pub fn configure_v8_worker_threads(worker_threads: u32) -> Result<(), ConfigError> {
    platform::configure(worker_threads)
}

/// Why a [`WorkerThreadCodeRuntime`] could not be constructed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerThreadError {
    /// An invalid setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `process` isolation: the sandbox cannot be had (a layer `sandbox.require` asks for does
    /// not hold on this machine; the message says which and what to do).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// `process` isolation: the cell executable does not run programs in a cell.
    #[error("code-runtime-worker-thread: the cell executable {} cannot run programs: {why}", executable.display())]
    Cell {
        /// The executable, as resolved.
        executable: PathBuf,
        /// What went wrong.
        why: String,
    },
}

/// A [`CodeRuntime`] that runs TypeScript programs, each in a fresh V8 isolate on its own thread
/// or in a sandbox cell of its own ([`Isolation`]).
///
/// Cheap to share behind an `Arc`. V8 itself is initialised once per process, with the first
/// `thread` run; in `process` isolation each cell initialises its own.
#[derive(Debug)]
pub struct WorkerThreadCodeRuntime {
    host: Host<WorkerThread>,
}

/// What [`WorkerThreadCodeRuntime`]'s host runs: isolates on threads, or cells.
#[derive(Debug)]
struct WorkerThread {
    config: WorkerThreadConfig,
    cells: Option<process::Cells>,
    /// `thread` isolation: isolate threads started ahead of the next runs.
    ready: Spare<substrate::Ready>,
}

impl WorkerThreadCodeRuntime {
    /// Validates `config`; in `process` isolation, plans the cells and runs a trial program in
    /// one (tens of milliseconds), so a cell executable that does not serve cells fails here.
    ///
    /// # Errors
    ///
    /// [`WorkerThreadError::Config`] for invalid limits or a zero `max_concurrent_runs`;
    /// [`WorkerThreadError::Sandbox`] and [`WorkerThreadError::Cell`] in `process` isolation.
    pub fn new(config: WorkerThreadConfig) -> Result<Self, WorkerThreadError> {
        config.limits.validate()?;
        RunGate::validate(config.max_concurrent_runs)?;
        let cells = match config.isolation {
            Isolation::Thread => None,
            Isolation::Process => Some(process::Cells::new(&config)?),
            other => {
                let requirement = "must be thread or process for TypeScript";
                return Err(ConfigError::new("isolation", requirement, other).into());
            }
        };
        let shape = substrate::shape(&config, &config.limits);
        let warm = config.warm && cells.is_none();
        let ready = Spare::new(
            if warm { WARM } else { 0 },
            // Off the reactor: the first isolate thread waits for V8 to initialise, and the
            // reactor drives every run's timers and sockets.
            move || Box::pin(substrate::ready_off_reactor(shape)),
            |ready| Box::pin(ready.discard()),
        );
        let (limits, max_concurrent_runs) = (config.limits, config.max_concurrent_runs);
        let provider = WorkerThread { config, cells, ready };
        Ok(Self { host: Host::new(provider, limits, max_concurrent_runs)? })
    }

    /// The configuration in force.
    pub fn config(&self) -> &WorkerThreadConfig {
        &self.host.provider().config
    }

    /// The sandbox layers that hold for every run in `process` isolation; `None` in `thread`
    /// isolation, where there are none.
    pub fn containment(&self) -> Option<Containment> {
        self.host.provider().cells.as_ref().map(process::Cells::containment)
    }
}

/// Isolates (`thread`) or cells (`process`) started ahead of the next runs. Two: runs back to
/// back then find one ready while the next is made on the other core (making an isolate takes
/// longer than a trivial run).
pub(crate) const WARM: usize = 2;

impl WorkerThread {
    /// `thread` isolation: a run's isolate thread, one started ahead when it fits.
    async fn thread(
        &self,
        shape: program::Shape,
        program: program::Program,
        stripped: Duration,
    ) -> Result<substrate::IsolateSubstrate, Ending> {
        // Isolates this process no longer waits for may hold too much for another.
        if let Some(why) = abandonment::out_of_service() {
            return Err(Ending::Failed(why));
        }
        // Only a run under the provider's own limits takes one (its heap limit is set).
        let fits = shape == substrate::shape(&self.config, &self.config.limits);
        let ready = match if fits { self.ready.take().await } else { None } {
            Some(ready) => ready,
            None => substrate::ready(shape)?,
        };
        Ok(ready.start(program, stripped))
    }
}

impl Hosted for WorkerThreadCodeRuntime {
    fn runtime(&self) -> &dyn CodeRuntime {
        &self.host
    }
}

impl Provider for WorkerThread {
    /// Boxed cell: it is the larger by hundreds of bytes, and one allocation per run is nothing
    /// beside a process.
    type Substrate = Either<substrate::IsolateSubstrate, Box<CellSubstrate<process::V8Protocol>>>;

    fn language(&self) -> Language {
        Language::TypeScript
    }

    fn isolation(&self) -> Isolation {
        self.config.isolation
    }

    /// A fresh isolate for the run, made ahead when one fits.
    ///
    /// Cancel safety: dropping a run terminates its isolate at once (kills its cell); its thread
    /// is joined (its cell reaped) on the provider's reactor, which disposal waits for.
    async fn start(&self, start: Start) -> Result<Self::Substrate, Ending> {
        let run = (start.limits, start.memory.clone(), start.table.clone());
        let shape = substrate::shape(&self.config, &start.limits);
        let (program, stripped) =
            substrate::program_off_reactor(start, self.config.legacy_decorators).await?;
        match &self.cells {
            None => self.thread(shape, program, stripped).await.map(Either::Left),
            Some(cells) => cells
                .start(shape, program, stripped, run)
                .await
                .map(|cell| Either::Right(Box::new(cell))),
        }
    }

    async fn close(&self) {
        self.ready.close().await;
        if let Some(cells) = &self.cells {
            cells.close().await;
        }
    }
}

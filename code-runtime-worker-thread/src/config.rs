//! [`WorkerThreadConfig`]: everything a
//! [`WorkerThreadCodeRuntime`](crate::WorkerThreadCodeRuntime) is constructed with.

use std::path::PathBuf;

use code_runtime::provider::DEFAULT_MAX_CONCURRENT_RUNS;
use code_runtime::{Isolation, Limits};
use code_runtime_sandbox::Options as SandboxOptions;

/// Configuration of the TypeScript provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerThreadConfig {
    /// The budgets of every run. `max_memory_mb` bounds V8's heap and the program's ArrayBuffer
    /// backing stores together; `compute_ms` is the isolate thread's CPU time (`thread`), or
    /// every thread's of the cell (`process`).
    pub limits: Limits,
    /// Allow `eval` and `new Function` (default `false`, as Cloudflare Workers do).
    pub allow_eval: bool,
    /// Allow WebAssembly (default `false`): without it the `WebAssembly` namespace is absent
    /// (a `WebAssembly.Memory` needs no compilation, and its pages are V8's own, outside the
    /// memory budget's allocator) and compilation is refused.
    pub allow_wasm: bool,
    /// Runs in flight at once (each is an isolate on its own thread, or a cell); more wait in a
    /// queue, their wall clock running. Default 64.
    pub max_concurrent_runs: usize,
    /// Where isolates live (default [`Isolation::Thread`]; the `code-runtime` command defaults to
    /// `process`).
    ///
    /// - [`Isolation::Thread`]: on a thread of the host's process, the lowest latency, for
    ///   trusted programs. A V8 fatal error ends the run and abandons its isolate, which keeps
    ///   what it holds; once 16 isolates, or 2 GiB, are abandoned, new `thread` runs are refused
    ///   until the process restarts (`abandonment.rs`). An exploit of V8 reaches the host.
    /// - [`Isolation::Process`]: in a sandbox cell of its own (a process with no files, no
    ///   network and nothing of the host, see docs/security.md): a V8 fatal error ends that run as
    ///   `worker-exit`, never the host. Needs an executable that serves cells (see
    ///   [`serve_cell_if_asked`](crate::serve_cell_if_asked)).
    pub isolation: Isolation,
    /// `process` isolation: the executable each cell runs, which must call
    /// [`serve_cell_if_asked`](crate::serve_cell_if_asked) first in `main`. `None` (the default)
    /// is this process's own executable. Construction runs a trial program in a cell and says
    /// what is wrong if it does not answer.
    pub cell_executable: Option<PathBuf>,
    /// `process` isolation: the layers of the cells, and whether one this machine cannot give is
    /// a construction error (`sandbox.require`, the default).
    pub sandbox: SandboxOptions,
    /// Keep two isolates started ahead of the next runs, made and waiting on their threads
    /// (`thread`) or in their cells (`process`) (default `true`), so a run under the provider's
    /// limits does not wait for an isolate to be made (about 2 ms) or a process to start. Each
    /// serves one run; the next is started as one is taken, and `dispose` ends them. A one-shot
    /// host that runs one program and exits gains nothing from it.
    pub warm: bool,
    /// `process` isolation: start the cells from a spawner process (default `true`): the cell
    /// executable, executed once outside any cell, which starts every cell of the provider as
    /// the host would. A cell is a copy of the process that starts it until its program runs,
    /// which costs a host with a large memory (a Python host with this library loaded, a
    /// server's heap) milliseconds of CPU per cell; the spawner process is small. It is started
    /// with the first cell, in the background, and again when it dies; cells start in the host
    /// until it is ready, or when it cannot be had. A one-shot host that runs one program and
    /// exits gains nothing from it. Its cells do not execute the cell executable: each is a copy
    /// of the spawner process (which has not started V8) that serves its run once its layers are
    /// on, sharing the executable's relocated pages with it (docs/security.md says what else a
    /// copy shares).
    pub spawner_process: bool,
    /// `process` isolation: a directory where what this machine's kernel gives the sandbox is
    /// remembered between processes (default `None`: probed once per process, a few
    /// milliseconds).
    pub machine_cache: Option<PathBuf>,
    /// TypeScript decorators as `tsc`'s `experimentalDecorators` runs them (the legacy proposal
    /// that Angular, NestJS, TypeORM and MobX were written for: a decorator gets the prototype,
    /// the name and the property descriptor), instead of TC39's (default `false`). No type
    /// metadata is emitted (`emitDecoratorMetadata` needs the type checker), and static
    /// members' decorators are applied in the order of the class body, where `tsc` applies
    /// every instance member's first.
    pub legacy_decorators: bool,
}

impl Default for WorkerThreadConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            allow_eval: false,
            allow_wasm: false,
            max_concurrent_runs: DEFAULT_MAX_CONCURRENT_RUNS,
            isolation: Isolation::Thread,
            cell_executable: None,
            sandbox: SandboxOptions::default(),
            warm: true,
            spawner_process: true,
            machine_cache: None,
            legacy_decorators: false,
        }
    }
}

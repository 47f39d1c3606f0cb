//! [`WorkerThreadConfig`]: everything a
//! [`WorkerThreadCodeRuntime`](crate::WorkerThreadCodeRuntime) is constructed with.

use code_runtime::Limits;
use code_runtime::provider::DEFAULT_MAX_CONCURRENT_RUNS;

/// Configuration of the TypeScript provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerThreadConfig {
    /// The budgets of every run. `max_memory_mb` bounds V8's heap and the program's ArrayBuffer
    /// backing stores together; `compute_ms` is the isolate thread's CPU time.
    pub limits: Limits,
    /// Allow `eval` and `new Function` (default `false`, as Cloudflare Workers do).
    pub allow_eval: bool,
    /// Allow WebAssembly (default `false`): without it the `WebAssembly` namespace is absent
    /// (a `WebAssembly.Memory` needs no compilation, and its pages are V8's own, outside the
    /// memory budget's allocator) and compilation is refused.
    pub allow_wasm: bool,
    /// Runs in flight at once (each is an isolate on its own thread); more wait in a queue, their
    /// wall clock running. Default 64.
    pub max_concurrent_runs: usize,
}

impl Default for WorkerThreadConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            allow_eval: false,
            allow_wasm: false,
            max_concurrent_runs: DEFAULT_MAX_CONCURRENT_RUNS,
        }
    }
}

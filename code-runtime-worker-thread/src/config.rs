//! [`WorkerThreadConfig`]: everything a
//! [`WorkerThreadCodeRuntime`](crate::WorkerThreadCodeRuntime) is constructed with.

use code_runtime::{ConfigError, Limits};

/// Configuration of the TypeScript provider.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerThreadConfig {
    /// The budgets of every run. `max_memory_mb` bounds V8's heap and the program's ArrayBuffer
    /// backing stores together; `compute_ms` is the isolate thread's CPU time.
    pub limits: Limits,
    /// Allow `eval` and `new Function` (default `false`, as Cloudflare Workers do).
    pub allow_eval: bool,
    /// Allow compiling WebAssembly (default `false`).
    pub allow_wasm: bool,
}

impl WorkerThreadConfig {
    /// Checks the limits.
    ///
    /// # Errors
    ///
    /// The first invalid setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.limits.validate()
    }
}

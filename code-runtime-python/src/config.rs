//! [`PythonConfig`]: everything a [`PythonCodeRuntime`](crate::PythonCodeRuntime) is constructed
//! with, validated once.

use std::path::PathBuf;

use code_runtime::provider::DEFAULT_MAX_CONCURRENT_RUNS;
use code_runtime::{ConfigError, Limits};

/// Configuration of the Python provider.
///
/// ```
/// use code_runtime::Limits;
/// use code_runtime_python::PythonConfig;
///
/// let config = PythonConfig { limits: Limits { compute_ms: 5_000, ..Limits::default() }, ..PythonConfig::default() };
/// # assert_eq!(config.interpreter.to_str(), Some("python3"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PythonConfig {
    /// The budgets of every run. `max_memory_mb` becomes the child's `RLIMIT_AS` (its whole address
    /// space, interpreter included), and `compute_ms` its CPU time, polled at millisecond precision
    /// with `RLIMIT_CPU` as the kernel's backstop.
    pub limits: Limits,
    /// The interpreter: a path, or a name looked up in `PATH` (default `python3`). Resolved once at
    /// construction to the real executable (`sys.executable`), so version-manager shims are not
    /// paid per run. CPython 3.9 or newer.
    pub interpreter: PathBuf,
    /// The longest line either side may write on fd 3, in bytes. A longer line from the child is a
    /// protocol violation that ends the run as `worker-exit`. `None` (the default) derives it from
    /// the output budget: `2 × max_output_bytes + 1 MiB`, which every honest frame fits (the child
    /// clips logs and refuses oversized values and arguments before sending them).
    pub max_frame_bytes: Option<usize>,
    /// Whether to give each run its own PID namespace when the kernel allows it (default `true`).
    /// Without one, the supervisor of each run is a child subreaper and sweeps what the program
    /// left behind; see [`Containment`](crate::Containment).
    pub pid_namespace: bool,
    /// Runs in flight at once (each is a child process); more wait in a queue, their wall clock
    /// running. Default 64.
    pub max_concurrent_runs: usize,
    /// Where the interpreter probe is remembered between processes (see [`ProbeCache`]).
    pub probe_cache: ProbeCache,
}

/// Where [`PythonCodeRuntime::new`](crate::PythonCodeRuntime::new) remembers what it learned of
/// the interpreter: its real executable, its version, and the bootstrap compiled to its bytecode.
///
/// The probe starts the interpreter three times (about 200 ms); a remembered one costs a file
/// read, which is what makes a one-shot `code-runtime run program.py` cheap. An entry is keyed by
/// the configured interpreter, the file it resolves to (identity and modification time), the
/// bootstrap, the memory limit and the user, and is used only while the real executable is the
/// same file; anything that changes makes a new probe.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProbeCache {
    /// `$XDG_CACHE_HOME/code-runtime`, else `$HOME/.cache/code-runtime`; no cache when neither is
    /// set. The default.
    #[default]
    UserCache,
    /// This directory (created `0700` if missing).
    Dir(PathBuf),
    /// Probe on every construction.
    Off,
}

impl Default for PythonConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            interpreter: PathBuf::from("python3"),
            max_frame_bytes: None,
            pid_namespace: true,
            max_concurrent_runs: DEFAULT_MAX_CONCURRENT_RUNS,
            probe_cache: ProbeCache::default(),
        }
    }
}

/// The smallest frame limit accepted: room for a boot frame and short messages.
const MIN_FRAME_BYTES: usize = 64 * 1024;

impl PythonConfig {
    /// Checks the limits and the frame limit (the interpreter is checked when it is resolved).
    ///
    /// # Errors
    ///
    /// The first invalid setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.limits.validate()?;
        if let Some(frame) = self.max_frame_bytes {
            let floor = self.output_bytes().saturating_add(MIN_FRAME_BYTES);
            if frame < floor {
                return Err(ConfigError::new(
                    "max_frame_bytes",
                    "must be at least max_output_bytes + 65536",
                    frame,
                ));
            }
        }
        Ok(())
    }

    /// The frame limit in force.
    pub fn frame_bytes(&self) -> usize {
        self.max_frame_bytes
            .unwrap_or_else(|| self.output_bytes().saturating_mul(2).saturating_add(1 << 20))
    }

    fn output_bytes(&self) -> usize {
        usize::try_from(self.limits.max_output_bytes).unwrap_or(usize::MAX)
    }
}

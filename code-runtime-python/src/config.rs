//! [`PythonConfig`]: everything a [`PythonCodeRuntime`](crate::PythonCodeRuntime) is constructed
//! with, validated once.

use std::path::PathBuf;

use code_runtime::provider::DEFAULT_MAX_CONCURRENT_RUNS;
use code_runtime::{ConfigError, Limits};
use code_runtime_sandbox::Options as SandboxOptions;

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
    /// The budgets of every run, charged for the whole cell: `compute_ms` is the CPU time of
    /// every process of the run (polled, with `RLIMIT_CPU` as the kernel's backstop on each), and
    /// `max_memory_mb` bounds each process's address space (`RLIMIT_AS`, interpreter included),
    /// the cell's `/tmp` (where files go), and the resident memory of all its processes together
    /// (polled).
    pub limits: Limits,
    /// The interpreter: a path, or a name looked up in `PATH` (default `python3`). Resolved once at
    /// construction to the real executable (`sys.executable`), so version-manager shims are not
    /// paid per run. CPython 3.9 or newer.
    ///
    /// A virtual environment's interpreter (`.venv/bin/python`) brings its packages: the
    /// environment's `site-packages` is granted read-only in every cell (nothing else of the
    /// environment, nothing writable) and added to the program's `sys.path` as `site` would
    /// (its `.pth` files included). Binary wheels such as numpy's work; their math libraries run
    /// one thread (`OPENBLAS_NUM_THREADS`, `OMP_NUM_THREADS` and `MKL_NUM_THREADS` are 1 in the
    /// cell), so a run stays within its process count on any machine.
    pub interpreter: PathBuf,
    /// Modules every run starts with imported (default none), e.g. `["numpy", "pandas"]`, on
    /// top of [`STANDARD_PRELOAD`]: imported once in the [`zygote`](Self::zygote), so each run's
    /// fork has them in memory without paying for the import, and nothing a run does to them
    /// reaches another run (each is a fresh fork). Without a zygote each cell imports them as it
    /// starts, ahead of its run when it is [started ahead](Self::warm_cell). A module that
    /// cannot be imported is an error at construction. With a zygote, what they map is granted on
    /// top of a run's address-space limit, as the interpreter's own start is. A preloaded module
    /// must not start threads (a zygote with threads cannot fork safely: it is not used then, and
    /// cells start from scratch).
    pub preload: Vec<String>,
    /// Whether the [`zygote`](Self::zygote) also imports [`STANDARD_PRELOAD`], the standard
    /// modules agent programs import (default `true`): `import asyncio, json` then costs a run
    /// nothing, where it costs tens of milliseconds imported afresh. Each is imported if it can
    /// be (an interpreter built without one serves without it). Cells started from scratch (no
    /// zygote) do not import them: there each would cost every cell what it saves the runs that
    /// use it.
    pub standard_preload: bool,
    /// The longest line either side may write on fd 3, in bytes. A longer line from the child is a
    /// protocol violation that ends the run as `worker-exit`. `None` (the default) derives it from
    /// the output budget: `2 × max_output_bytes + 1 MiB`, which every honest frame fits (the child
    /// clips logs and refuses oversized values and arguments before sending them). A run in a
    /// session reads frames of up to `2 × max_session_bytes + 1 MiB` when that is more.
    pub max_frame_bytes: Option<usize>,
    /// The layers of the sandbox cell every run executes in, and whether a layer this machine
    /// cannot give is a construction error (`sandbox.require`, the default: docs/design.md's
    /// `require_sandbox`). See [`PythonCodeRuntime::containment`](crate::PythonCodeRuntime::containment).
    pub sandbox: SandboxOptions,
    /// Processes and threads a run may have at once, all of its cell together, the cell's init
    /// and the interpreter included (default 64). Enforced where the sandbox has a user namespace
    /// or the host is root (see `Containment::process_limit`).
    pub max_processes: u32,
    /// Keep a cell started ahead of the next run, its interpreter loaded and waiting (default
    /// `true`): one started from scratch, or two forked from the [`zygote`](Self::zygote). A run
    /// under the provider's limits then does not wait for its cell (a few milliseconds instead of
    /// tens). The cell is fresh (no program ran in it) and serves one run; the next is started as
    /// it is taken. It costs an idle interpreter (a few MB from scratch, under one forked), and
    /// `dispose` ends it. A one-shot host that runs one program and exits gains nothing from it.
    pub warm_cell: bool,
    /// Fork each run's cell from a zygote (default `true`): one interpreter per provider, started
    /// once in a cell of its own with the bootstrap loaded, which forks a fresh process per run
    /// that enters namespaces of its own and applies every layer before the program's first
    /// byte (milliseconds instead of an interpreter's start). Where the zygote cannot be had (no
    /// user namespaces, say), cells start from scratch;
    /// [`containment`](crate::PythonCodeRuntime::containment)`.zygote` says which. A zygote
    /// that dies is started again; one that cannot be is given up for the provider's life.
    pub zygote: bool,
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

impl ProbeCache {
    /// The directory this names, if any: the interpreter's probe and the sandbox's probe of the
    /// machine are remembered there.
    pub(crate) fn dir(&self) -> Option<PathBuf> {
        match self {
            Self::Off => None,
            Self::Dir(dir) => Some(dir.clone()),
            Self::UserCache => code_runtime_sandbox::cache::user_dir(),
        }
    }
}

impl Default for PythonConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            interpreter: PathBuf::from("python3"),
            preload: Vec::new(),
            standard_preload: true,
            max_frame_bytes: None,
            sandbox: SandboxOptions::default(),
            max_processes: DEFAULT_MAX_PROCESSES,
            warm_cell: true,
            zygote: true,
            max_concurrent_runs: DEFAULT_MAX_CONCURRENT_RUNS,
            probe_cache: ProbeCache::default(),
        }
    }
}

/// The standard modules the zygote imports unless [`PythonConfig::standard_preload`] is off:
/// those agent programs import (for the loop `run_code`'s description recommends, for JSON,
/// text, dates, numbers, identifiers, encodings and URLs), and what they import in turn.
///
/// Chosen by measure (`code-runtime bench`'s `import_run_ms`, and each module's import after
/// these on CPython 3.11): `asyncio` alone took 38 ms of a run, `dataclasses` 15, `typing` 9,
/// `uuid` 9, `urllib.parse` 8, `json` 7; those after them add one to three milliseconds each
/// (`statistics`, `fractions`, `zoneinfo`, `html`, `decimal`), and the rest of this list comes
/// with the first ones; `pickle` (5 ms) is what a run in a session saves its values with. Costs:
/// the zygote's start (once) and its memory, shared by every fork.
pub const STANDARD_PRELOAD: &[&str] = &[
    "asyncio",
    "base64",
    "collections",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "heapq",
    "html",
    "itertools",
    "json",
    "math",
    "pickle",
    "random",
    "re",
    "statistics",
    "string",
    "textwrap",
    "typing",
    "urllib.parse",
    "uuid",
    "zoneinfo",
];

/// Processes and threads of one run, unless configured.
pub const DEFAULT_MAX_PROCESSES: u32 = code_runtime_sandbox::DEFAULT_PROCESSES;

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
        code_runtime::provider::RunGate::validate(self.max_concurrent_runs)?;
        // The cell's init and the interpreter count.
        if self.max_processes < 2 {
            return Err(ConfigError::new(
                "max_processes",
                "must be at least 2",
                self.max_processes,
            ));
        }
        for module in &self.preload {
            let identifier = |part: &str| {
                part.chars().next().is_some_and(|first| first.is_alphabetic() || first == '_')
                    && part.chars().all(|c| c.is_alphanumeric() || c == '_')
            };
            if !module.split('.').all(identifier) {
                return Err(ConfigError::new(
                    "preload",
                    "must name modules (dotted Python identifiers)",
                    module,
                ));
            }
        }
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

    /// The frame limit of a run in a session whose state may reach `max_session_bytes`: the
    /// state crosses in base64, a third larger than it is, so `2 × max_session_bytes + 1 MiB`
    /// when that is more than [`frame_bytes`](Self::frame_bytes).
    pub fn session_frame_bytes(&self, max_session_bytes: u64) -> usize {
        let session = usize::try_from(max_session_bytes).unwrap_or(usize::MAX);
        self.frame_bytes().max(session.saturating_mul(2).saturating_add(1 << 20))
    }

    fn output_bytes(&self) -> usize {
        usize::try_from(self.limits.max_output_bytes).unwrap_or(usize::MAX)
    }
}

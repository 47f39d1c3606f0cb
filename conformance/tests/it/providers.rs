//! The provider suites: tests of the host API, the budgets and approvals, each written once and
//! run against every provider (TypeScript in `thread` and in `process` isolation, Python). Where
//! the languages must differ, a test gives the program in each ([`Provider::program`]); where
//! the contract lets the providers differ (how memory is enforced), the expectation does.

mod approval;
mod budgets;
mod host_api;
mod sessions;

use std::fmt;
use std::sync::{Arc, OnceLock};

use code_runtime::{
    BindingFunction, CodeBindingNamespace, CodeRunRequest, CodeRunResult, CodeRuntime, JsonValue,
    Limits, binding,
};
use code_runtime_python::{PythonCodeRuntime, PythonConfig};
use code_runtime_worker_thread::{Isolation, WorkerThreadCodeRuntime, WorkerThreadConfig};

/// One provider under test.
pub(crate) struct Provider {
    /// Its name in failure messages.
    name: &'static str,
    pub(crate) language: Language,
    /// A runtime of it with `limits`, and at most so many runs at once if given.
    make: fn(Limits, Option<usize>) -> Arc<dyn CodeRuntime>,
    /// Its runtime with the default limits, made once.
    shared: OnceLock<Arc<dyn CodeRuntime>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Language {
    TypeScript,
    Python,
}

/// Every provider, in the order the suites run them.
static PROVIDERS: [Provider; 3] = [
    Provider {
        name: "typescript (thread)",
        language: Language::TypeScript,
        make: |limits, runs| typescript(limits, runs, Isolation::Thread),
        shared: OnceLock::new(),
    },
    Provider {
        name: "typescript (process)",
        language: Language::TypeScript,
        make: |limits, runs| typescript(limits, runs, Isolation::Process),
        shared: OnceLock::new(),
    },
    Provider {
        name: "python",
        language: Language::Python,
        make: |limits, runs| {
            let mut config = PythonConfig { limits, ..PythonConfig::default() };
            config.max_concurrent_runs = runs.unwrap_or(config.max_concurrent_runs);
            Arc::new(PythonCodeRuntime::new(config).expect("python3 is installed"))
        },
        shared: OnceLock::new(),
    },
];

fn typescript(limits: Limits, runs: Option<usize>, isolation: Isolation) -> Arc<dyn CodeRuntime> {
    let cell_executable = matches!(isolation, Isolation::Process)
        .then(|| env!("CARGO_BIN_EXE_conformance-v8-cell").into());
    let mut config =
        WorkerThreadConfig { limits, isolation, cell_executable, ..WorkerThreadConfig::default() };
    config.max_concurrent_runs = runs.unwrap_or(config.max_concurrent_runs);
    Arc::new(WorkerThreadCodeRuntime::new(config).unwrap())
}

/// Runs `check` against every provider, or those of one language when `CONFORMANCE_PROVIDER`
/// names it (`cargo xtask conformance --provider python`).
pub(crate) fn each_provider(check: impl Fn(&Provider)) {
    let only = std::env::var("CONFORMANCE_PROVIDER").ok();
    for provider in &PROVIDERS {
        if only.as_deref().is_none_or(|language| language == provider.language.name()) {
            check(provider);
        }
    }
}

impl Language {
    /// As `CONFORMANCE_PROVIDER` names it.
    fn name(self) -> &'static str {
        match self {
            Language::TypeScript => "typescript",
            Language::Python => "python",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl Provider {
    /// The program of its language.
    pub(crate) fn program(&self, typescript: &'static str, python: &'static str) -> &'static str {
        match self.language {
            Language::TypeScript => typescript,
            Language::Python => python,
        }
    }

    /// Its runtime with the default limits.
    pub(crate) fn runtime(&self) -> &dyn CodeRuntime {
        self.shared.get_or_init(|| (self.make)(Limits::default(), None)).as_ref()
    }

    /// A runtime of its own with `limits`.
    pub(crate) fn with(&self, limits: Limits) -> Arc<dyn CodeRuntime> {
        (self.make)(limits, None)
    }

    /// A runtime of its own that runs at most `runs` programs at once.
    pub(crate) fn with_runs(&self, runs: usize) -> Arc<dyn CodeRuntime> {
        (self.make)(Limits::default(), Some(runs))
    }

    /// Runs `request` on its default runtime.
    pub(crate) fn run(&self, request: CodeRunRequest) -> CodeRunResult {
        run_on(self.runtime(), request)
    }
}

/// A multi-thread runtime shared by the suites: runs are independent, and the child-reaping
/// machinery of tokio lives as long as the process.
pub(crate) fn tokio() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    })
}

pub(crate) fn run_on(runtime: &dyn CodeRuntime, request: CodeRunRequest) -> CodeRunResult {
    tokio().block_on(runtime.run(request)).expect("not contract misuse")
}

/// `T{…}` of docs/reference.md §5: the `tools` namespace with the Code Mode error class.
pub(crate) fn tools() -> CodeBindingNamespace {
    CodeBindingNamespace::new("tools").error_class("ToolCallError", "toolName")
}

/// A binding that never settles.
pub(crate) fn never() -> BindingFunction {
    binding(|_| std::future::pending())
}

#[track_caller]
pub(crate) fn value(result: &CodeRunResult) -> &JsonValue {
    assert!(result.is_ok(), "run failed: {}", result.to_json());
    result.value().expect("a value")
}

/// The kind (as spelled on the wire) and message of a failed run.
pub(crate) fn failure(result: &CodeRunResult) -> Option<(&'static str, String)> {
    result.error().map(|error| (error.kind().as_str(), error.message().to_owned()))
}

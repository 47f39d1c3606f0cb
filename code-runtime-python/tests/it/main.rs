//! Integration tests of the Python provider against a real `python3`. Tests named `cNNN_…` cover
//! the numbered case of REFERENCE.md §5 (docs/conformance.md maps them).

mod budgets;
mod contract;
mod host_api;
mod hostile;
mod protocol;

use std::sync::OnceLock;

use code_runtime::{
    BindingError, CodeBindingNamespace, CodeRunRequest, CodeRunResult, CodeRuntime, JsonValue,
    Limits, binding,
};
use code_runtime_python::{ProbeCache, PythonCodeRuntime, PythonConfig, PythonError};

/// A multi-thread runtime shared by the tests: runs are independent, and the child-reaping
/// machinery of tokio lives as long as the process.
fn tokio() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    })
}

fn runtime(limits: Limits) -> PythonCodeRuntime {
    PythonCodeRuntime::new(PythonConfig { limits, ..PythonConfig::default() })
        .expect("python3 is installed")
}

fn default_runtime() -> &'static PythonCodeRuntime {
    static RUNTIME: OnceLock<PythonCodeRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| runtime(Limits::default()))
}

/// `T{…}` of REFERENCE.md §5: the `tools` namespace with the Code Mode error class.
fn tools() -> CodeBindingNamespace {
    CodeBindingNamespace::new("tools").error_class("ToolCallError", "toolName")
}

fn echo() -> code_runtime::BindingFunction {
    binding(|args| async move { Ok(args.into()) })
}

fn reject(message: &'static str) -> code_runtime::BindingFunction {
    binding(move |_| async move { Err(BindingError::new(message)) })
}

fn run_on(runtime: &PythonCodeRuntime, request: CodeRunRequest) -> CodeRunResult {
    tokio().block_on(runtime.run(request)).expect("not contract misuse")
}

fn run(program: &str, bindings: Vec<CodeBindingNamespace>) -> CodeRunResult {
    run_on(default_runtime(), CodeRunRequest { bindings, ..CodeRunRequest::new(program) })
}

#[track_caller]
fn value(result: &CodeRunResult) -> &JsonValue {
    assert!(result.is_ok(), "run failed: {}", result.to_json());
    result.value().expect("a value")
}

/// Counts the calls of a binding that resolves with `reply`.
fn counted(
    reply: JsonValue,
) -> (code_runtime::BindingFunction, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    let function = binding(move |_| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let reply = reply.clone();
        async move { Ok(reply) }
    });
    (function, count)
}

/// A binding that never settles.
fn never() -> code_runtime::BindingFunction {
    binding(|_| std::future::pending())
}

/// A binding that resolves with `reply` after `ms` milliseconds.
fn delayed(ms: u64, reply: JsonValue) -> code_runtime::BindingFunction {
    binding(move |_| {
        let reply = reply.clone();
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            Ok(reply)
        }
    })
}

/// A scratch directory for files a test and its program share, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir()
            .join(format!("code-runtime-python-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn file(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether some process still holds a lock on `path` (the programs under test lock a file and keep
/// it locked for as long as they live).
fn lock_is_held(path: &str) -> bool {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap();
    // SAFETY: flock on a descriptor we own.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    locked != 0
}

/// The kind (as spelled on the wire) and message of a failed run.
fn failure(result: &CodeRunResult) -> Option<(&'static str, String)> {
    result.error().map(|error| (error.kind().as_str(), error.message().to_owned()))
}

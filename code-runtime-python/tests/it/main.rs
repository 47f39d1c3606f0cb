//! Integration tests of the Python provider against a real `python3`. Tests named `cNNN_…` cover
//! the numbered case of docs/reference.md §5 (docs/conformance.md maps them).

mod approval;
mod budgets;
mod contract;
mod escape;
mod host_api;
mod hostile;
mod packages;
mod zygote;

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

/// `T{…}` of docs/reference.md §5: the `tools` namespace with the Code Mode error class.
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

/// What a program tells the host about its cell: `await cell.announce(...)` (see [`ANNOUNCE`])
/// records the PID namespace the program runs in and answers with how many processes of it the
/// host sees, so a test can check afterwards that none is left, knowing that its check would have
/// seen them.
#[derive(Clone, Default)]
struct Announced(std::sync::Arc<std::sync::Mutex<Option<u64>>>);

/// The program's side of [`Announced`]: announces its PID namespace and returns the host's count.
const ANNOUNCE: &str =
    "import os\nseen = await cell.announce(os.stat('/proc/self/ns/pid').st_ino)\n";

impl Announced {
    fn namespace(&self) -> CodeBindingNamespace {
        let slot = self.0.clone();
        CodeBindingNamespace::new("cell").function(
            "announce",
            binding(move |args| {
                let slot = slot.clone();
                async move {
                    let namespace = args.as_u64().ok_or("a namespace inode")?;
                    *slot.lock().unwrap() = Some(namespace);
                    Ok(code_runtime::json!(processes_in(namespace)))
                }
            }),
        )
    }

    fn get(&self) -> Option<u64> {
        *self.0.lock().unwrap()
    }
}

/// Waits until no process of the PID namespace `namespace` is left. When a run returns, its cell
/// has been killed; the kernel finishes tearing it down in the background (`dispose` waits for
/// that), so this allows it a few seconds.
#[track_caller]
fn assert_gone(namespace: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while processes_in(namespace) > 0 {
        assert!(std::time::Instant::now() < deadline, "a process of the cell outlived its run");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// How many processes of the PID namespace `namespace` (its inode) the host sees.
fn processes_in(namespace: u64) -> usize {
    host_pids_in(namespace).len()
}

/// Host pids of the processes in the PID namespace `namespace`.
fn host_pids_in(namespace: u64) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|entry| {
            std::fs::metadata(entry.path().join("ns/pid")).is_ok_and(|m| m.ino() == namespace)
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The kind (as spelled on the wire) and message of a failed run.
fn failure(result: &CodeRunResult) -> Option<(&'static str, String)> {
    result.error().map(|error| (error.kind().as_str(), error.message().to_owned()))
}

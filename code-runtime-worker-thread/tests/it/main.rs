//! Integration tests of the V8 provider. Tests named `cNNN_…` cover the numbered case of
//! docs/reference.md §5 (docs/conformance.md maps them).

mod attacks;
mod budgets;
mod contract;
mod host_api;
mod hostile;
mod node;
mod process;
mod web;

use std::sync::OnceLock;

use code_runtime::{
    BindingError, BindingFunction, CodeBindingNamespace, CodeRunRequest, CodeRunResult,
    CodeRuntime, JsonValue, Limits, binding,
};
use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};

fn tokio() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    })
}

fn runtime(limits: Limits) -> WorkerThreadCodeRuntime {
    WorkerThreadCodeRuntime::new(WorkerThreadConfig { limits, ..WorkerThreadConfig::default() })
        .unwrap()
}

/// A runtime in `process` isolation, its cells running this crate's cell executable.
fn process_runtime(limits: Limits) -> WorkerThreadCodeRuntime {
    WorkerThreadCodeRuntime::new(WorkerThreadConfig {
        limits,
        isolation: code_runtime_worker_thread::Isolation::Process,
        cell_executable: Some(env!("CARGO_BIN_EXE_code-runtime-v8-cell").into()),
        ..WorkerThreadConfig::default()
    })
    .unwrap()
}

fn default_runtime() -> &'static WorkerThreadCodeRuntime {
    static RUNTIME: OnceLock<WorkerThreadCodeRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| runtime(Limits::default()))
}

/// Resident memory of this process, in MiB.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
}

/// `T{…}` of docs/reference.md §5.
fn tools() -> CodeBindingNamespace {
    CodeBindingNamespace::new("tools").error_class("ToolCallError", "toolName")
}

fn echo() -> BindingFunction {
    binding(|args| async move { Ok(args.into()) })
}

fn reject(message: &'static str) -> BindingFunction {
    binding(move |_| async move { Err(BindingError::new(message)) })
}

fn never() -> BindingFunction {
    binding(|_| std::future::pending())
}

fn run_on(runtime: &WorkerThreadCodeRuntime, request: CodeRunRequest) -> CodeRunResult {
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

/// The kind (as spelled on the wire) and message of a failed run.
fn failure(result: &CodeRunResult) -> Option<(&'static str, String)> {
    result.error().map(|error| (error.kind().as_str(), error.message().to_owned()))
}

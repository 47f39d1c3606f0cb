//! Integration tests of the Python provider against a real `python3`. Tests named `cNNN_…` cover
//! the numbered case of REFERENCE.md §5 (docs/conformance.md maps them).

mod contract;

use std::sync::OnceLock;

use code_runtime::{
    BindingError, CodeBindingNamespace, CodeRunRequest, CodeRunResult, CodeRuntime, JsonValue,
    Limits, binding,
};
use code_runtime_python::{PythonCodeRuntime, PythonConfig};

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
    binding(|args| async move { Ok(args) })
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

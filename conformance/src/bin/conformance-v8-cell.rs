//! The cell executable of the conformance suite's `process` isolation runs: it serves one V8
//! cell when the TypeScript provider starts it as one, and does nothing otherwise.

fn main() -> std::process::ExitCode {
    code_runtime_worker_thread::serve_cell_if_asked();
    std::process::ExitCode::from(2)
}

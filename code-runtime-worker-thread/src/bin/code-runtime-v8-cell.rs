//! The cell executable of `process` isolation, for hosts whose own `main` cannot serve cells:
//! name it in `WorkerThreadConfig::cell_executable`. Started any other way, it says what it is.

use std::io::Write;

fn main() -> std::process::ExitCode {
    code_runtime_worker_thread::serve_cell_if_asked();
    let _ = writeln!(
        std::io::stderr(),
        "code-runtime-v8-cell: runs one TypeScript program in a sandbox cell for \
         code-runtime-worker-thread; it is started by the provider, not by hand"
    );
    std::process::ExitCode::from(2)
}

//! The `code-runtime` command (CLI.md).
//!
//! No provider is built in yet, so every subcommand is refused as usage error (exit code 2, one line
//! on stderr) instead of pretending to run anything.

use std::process::ExitCode;

fn main() -> ExitCode {
    let first = std::env::args().nth(1);
    let message = match first.as_deref() {
        Some("run" | "bench") => "no provider is built into this command yet",
        Some(other) => {
            return usage(&format!("unknown command {}", code_runtime::json::quote(other)));
        }
        None => "missing command (run, bench)",
    };
    usage(message)
}

#[expect(clippy::print_stderr, reason = "the CLI contract: misuse is one line on stderr")]
fn usage(message: &str) -> ExitCode {
    eprintln!("code-runtime: {message}");
    ExitCode::from(2)
}

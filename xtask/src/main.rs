//! Project automation, run as `cargo xtask <command>` (see <https://github.com/matklad/cargo-xtask/>).
//!
//! - `test [ARGS] [-- HARNESS ARGS]`: the test command of the README: installs the pinned type
//!   checkers of `typecheck/` and MCP peers of `mcp-peers/` when they are not there, then what
//!   `cargo test --workspace [ARGS]` runs, with the offline V8 library wired in when it is
//!   present: every test binary built once, then run a few at a time (see `test_runner.rs`),
//!   then the doc tests. `test --stress N [ARGS]` runs it N times with CPU hogs beside it and
//!   names every test that failed even once (see `stress.rs`).
//! - `demo`: the main job of the README: a real TypeScript program against real bindings through
//!   the `code-runtime` command.
//! - `tidy`: repository conventions that neither rustc nor clippy checks.
//! - `tools`: what `test` and `wheel` install first (the pinned type checkers, MCP peers, Python
//!   packages, haproxy, the wheel's build and test tools), alone: a machine or an image layer
//!   made ahead of the runs. (Installed beside the lints, it slowed them more than it saved:
//!   pip compiles every module it installs.)
//! - `conformance [--provider typescript|python] [--suite NAME]`: the cross-provider suite.
//! - `bench [--quick] [--json]`: the providers' figures against their baselines, in release mode.
//! - `bench-mcp [--quick] [--json]`: `code-runtime mcp` in release mode: one `run_code` fanning
//!   out 20 upstream calls against the same 20 calls made directly by an MCP client
//!   (`code-runtime-cli/tests/mcp/bench.py`, with the peers of `mcp-peers/`), then 1 000
//!   `run_code` at once over HTTP (`code-runtime-cli/tests/mcp/load.py`: success, timer
//!   lateness, memory, descriptors and processes left).
//! - `wheel [--release] [--no-test] [PYTEST ARGS]`: the Python package built into a wheel,
//!   installed into a fresh virtual environment and tested there (see `wheel.rs`).
//! - `unprivileged [ARGS]`: the containment suites (sandbox, Python) as an unprivileged user;
//!   needs root (see `unprivileged.rs`).
//! - `image [--tag NAME]`: the `Containerfile` built by podman, docker or buildah, or why not
//!   (see `image.rs`).
#![allow(clippy::print_stdout, clippy::print_stderr, reason = "a command-line tool")]

mod image;
mod stress;
mod test_runner;
mod test_tools;
mod tidy;
mod toolchain;
mod unprivileged;
mod wheel;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    let rest: Vec<String> = args.collect();
    let outcome = match command.as_deref() {
        Some("test") => test_tools::install().and_then(|()| match rest.as_slice() {
            [flag, rounds, args @ ..] if flag == "--stress" => {
                let rounds =
                    rounds.parse().map_err(|_| format!("--stress needs a number, got {rounds}"))?;
                // The whole workspace, unless packages are named.
                let named = named_packages(args);
                let mut all = if named { Vec::new() } else { vec!["--workspace".to_owned()] };
                all.extend_from_slice(args);
                stress::run(rounds, &all)
            }
            // The whole workspace, unless packages are named (cargo would test every package
            // given `--workspace` beside `-p`).
            _ => {
                let (cargo_args, harness_args) = split_at_dashes(&rest);
                let workspace: &[&str] =
                    if named_packages(&rest) { &[] } else { &["--workspace"] };
                test_runner::run(&[workspace, &cargo_args[..]].concat(), &harness_args)
            }
        }),
        Some("demo") => toolchain::cargo(&[
            "run",
            "--quiet",
            "--package",
            "code-runtime-cli",
            "--",
            "run",
            "examples/research.ts",
            "--bindings",
            "examples/research.bindings.json",
        ]),
        Some("tidy") => tidy::run(),
        Some("tools") => test_tools::install().and_then(|()| wheel::install_tools().map(drop)),
        Some("image") => image::run(&rest),
        Some("unprivileged") => unprivileged::run(&rest),
        Some("wheel") => wheel::run(&rest),
        Some("conformance") => conformance(&rest),
        Some("bench-mcp") => bench_mcp(&rest),
        Some("bench") => toolchain::cargo(
            &[
                &["run", "--quiet", "--release", "--package", "code-runtime-cli", "--", "bench"],
                &strs(&rest)[..],
            ]
            .concat(),
        ),
        Some(other) => Err(format!(
            "unknown command `{other}` (test, demo, tidy, tools, bench, bench-mcp, conformance, unprivileged, wheel, image)"
        )),
        None => {
            Err("missing command (test, demo, tidy, tools, bench, bench-mcp, conformance, unprivileged, wheel, image)"
                .to_owned())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `conformance [--provider typescript|python] [--suite NAME]`: the conformance test, filtered.
fn conformance(args: &[String]) -> Result<(), String> {
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let variable = match flag.as_str() {
            "--provider" => "CONFORMANCE_PROVIDER",
            "--suite" => "CONFORMANCE_SUITE",
            other => return Err(format!("unknown conformance option {other}")),
        };
        // SAFETY: xtask is single-threaded, so nothing reads the environment while it changes;
        // the variable reaches the test process through cargo.
        unsafe { std::env::set_var(variable, value) };
    }
    toolchain::cargo_test(&["--package", "conformance", "--test", "it"])
}

/// `args` before `--` (cargo's) and after it (the test harness's).
fn split_at_dashes(args: &[String]) -> (Vec<&str>, Vec<&str>) {
    let strs = strs(args);
    match strs.iter().position(|arg| *arg == "--") {
        Some(at) => (strs[..at].to_vec(), strs[at + 1..].to_vec()),
        None => (strs, Vec::new()),
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `code-runtime-cli/tests/mcp/bench.py` against the release binary.
#[expect(clippy::disallowed_methods, reason = "the pinned MCP client that measures")]
fn bench_mcp(rest: &[String]) -> Result<(), String> {
    test_tools::install()?;
    toolchain::cargo(&["build", "--quiet", "--release", "--package", "code-runtime-cli"])?;
    let root = toolchain::project_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), std::path::PathBuf::from);
    // The fan-out against direct calls, then the load test.
    for script in ["bench.py", "load.py"] {
        let status = std::process::Command::new(root.join("mcp-peers/.venv/bin/python"))
            .arg(root.join("code-runtime-cli/tests/mcp").join(script))
            .arg(target.join("release/code-runtime"))
            .args(rest)
            .status()
            .map_err(|error| format!("cannot run {script}: {error}"))?;
        if !status.success() {
            return Err(format!("{script} failed ({status})"));
        }
    }
    Ok(())
}

/// Whether `args` name packages (`-p X`, `--package X`, `-pX`).
fn named_packages(args: &[String]) -> bool {
    args.iter().any(|arg| arg.starts_with("-p") || arg.starts_with("--package"))
}

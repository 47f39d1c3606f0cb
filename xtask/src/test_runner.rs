//! The test command's runner: `cargo test --no-run` builds every test binary once, then the
//! binaries run [`JOBS`] at a time, each one's output printed whole as it ends, and the doc
//! tests last.
//!
//! `cargo test` runs its binaries one after another, and most of their time is spent waiting
//! (timers, cells starting, child processes, MCP peers), not computing: on this project's 2-core
//! CI machine the suites took as long as the build. Run side by side they take about as long as
//! the longest of them. Every binary runs as cargo would run it: in its package's directory,
//! with cargo's variables, with the arguments after `--`; and every one runs even when another
//! failed (a red run names every failure, not the first).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use crate::toolchain;

/// Binaries running at once: two on this project's 2-core CI machine. (Three finished no sooner,
/// and stretched the waits of timing-sensitive tests past their bounds.)
const JOBS: usize = 2;

/// A test binary cargo built, and where it runs.
pub(crate) struct TestBinary {
    pub(crate) path: PathBuf,
    pub(crate) package_dir: PathBuf,
    /// Its package's name (`CARGO_PKG_NAME`).
    pub(crate) package: String,
    /// A unit-test harness (of a library or binary) rather than an integration test.
    pub(crate) unit: bool,
}

/// Builds the test binaries `cargo test CARGO_ARGS` would run, runs them, then the doc tests
/// (unless the arguments select targets, as `cargo test` itself would then skip them); every
/// binary gets `harness_args`. Closes with one line totalling every `test result:` line.
pub(crate) fn run(cargo_args: &[&str], harness_args: &[&str]) -> Result<(), String> {
    let binaries = test_binaries(cargo_args)?;
    let (passed, failed, mut failures) = run_binaries(binaries, harness_args);
    let (mut passed, mut failed) = (passed, failed);
    if !selects_targets(cargo_args) {
        let doc =
            [&["test", "--doc"], &toolchain::TEST_PROFILE[..], cargo_args, &["--"], harness_args]
                .concat();
        match toolchain::cargo_test_counted(&doc) {
            Ok((doc_passed, doc_failed)) => {
                passed += doc_passed;
                failed += doc_failed;
            }
            Err(why) => failures.push(why),
        }
    }
    println!("tests: {passed} passed, {failed} failed");
    if !failures.is_empty() {
        return Err(format!("failed: {}", failures.join("; ")));
    }
    if passed == 0 {
        return Err("no test ran".to_owned());
    }
    Ok(())
}

/// Whether `args` select targets (`--test it`, `--lib`, …): then cargo runs no doc tests.
fn selects_targets(args: &[&str]) -> bool {
    const SELECTING: [&str; 10] = [
        "--lib",
        "--bin",
        "--bins",
        "--test",
        "--tests",
        "--example",
        "--examples",
        "--bench",
        "--benches",
        "--all-targets",
    ];
    args.iter().any(|arg| SELECTING.iter().any(|flag| arg.split('=').next() == Some(flag)))
}

/// The test binaries of `cargo test --no-run CARGO_ARGS`, built (its diagnostics on stderr).
pub(crate) fn test_binaries(cargo_args: &[&str]) -> Result<Vec<TestBinary>, String> {
    let args = [
        &["test", "--no-run", "--message-format=json-render-diagnostics"],
        &toolchain::TEST_PROFILE[..],
        cargo_args,
    ]
    .concat();
    let output = toolchain::cargo_output(&args)?;
    let binaries: Vec<TestBinary> = output.lines().filter_map(test_binary).collect();
    if binaries.is_empty() {
        return Err("cargo built no test binary".to_owned());
    }
    Ok(binaries)
}

/// The test binary one line of cargo's JSON reports, if it reports one: a compiler artifact
/// built with a test profile (the target's own `"test":true` only says it may be tested), with
/// an executable.
fn test_binary(line: &str) -> Option<TestBinary> {
    if !line.contains(r#""reason":"compiler-artifact""#) {
        return None;
    }
    let profile = &line[line.find(r#""profile":{"#)?..];
    if !profile[..profile.find('}')?].contains(r#""test":true"#) {
        return None;
    }
    let manifest = field(line, "manifest_path")?;
    let package_dir = Path::new(&manifest).parent()?.to_path_buf();
    // The package id: `path+file:///dir#name@version`, or `…/name#version`.
    let id = field(line, "package_id")?;
    let package = match id.rsplit_once('#')?.1.split_once('@') {
        Some((name, _)) => name.to_owned(),
        None => package_dir.file_name()?.to_string_lossy().into_owned(),
    };
    let unit = !line.contains(r#""kind":["test"]"#);
    Some(TestBinary { path: PathBuf::from(field(line, "executable")?), package_dir, package, unit })
}

/// The string value of `"name":"…"` in one line of cargo's JSON (paths here have no escapes).
pub(crate) fn field(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!(r#""{name}":""#))? + name.len() + 4;
    let end = start + line[start..].find('"')?;
    Some(line[start..end].to_owned())
}

/// What came of the binaries: tests passed, tests failed, and the binaries that failed.
pub(crate) type Outcome = (u64, u64, Vec<String>);

/// One test binary to run: how, and what to call it in the output.
pub(crate) struct Job {
    pub(crate) name: String,
    pub(crate) command: Command,
}

/// Runs `binaries` as cargo would, integration tests first (they take longest).
#[expect(clippy::disallowed_methods, reason = "xtask runs test binaries, not a Python child")]
fn run_binaries(mut binaries: Vec<TestBinary>, harness_args: &[&str]) -> Outcome {
    binaries.sort_by_key(|binary| binary.unit);
    let jobs = binaries
        .into_iter()
        .map(|binary| {
            let mut command = Command::new(&binary.path);
            command
                .args(harness_args)
                .current_dir(&binary.package_dir)
                .env("CARGO_MANIFEST_DIR", &binary.package_dir)
                .env("CARGO_PKG_NAME", &binary.package)
                .env("CARGO", std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            Job { name: format!("{} ({})", binary.path.display(), binary.package), command }
        })
        .collect();
    run_jobs(jobs)
}

/// Runs `jobs`, [`JOBS`] at a time, in their order.
pub(crate) fn run_jobs(jobs: Vec<Job>) -> Outcome {
    let queue = Arc::new(Mutex::new(VecDeque::from(jobs)));
    let outcome: Arc<Mutex<Outcome>> = Arc::default();
    let workers: Vec<_> = (0..JOBS)
        .map(|_| {
            let (queue, outcome) = (queue.clone(), outcome.clone());
            std::thread::spawn(move || {
                loop {
                    let next = queue.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
                    let Some(job) = next else { break };
                    let (passed, failed, failure) = run_one(job);
                    let mut outcome = outcome.lock().unwrap_or_else(PoisonError::into_inner);
                    outcome.0 += passed;
                    outcome.1 += failed;
                    outcome.2.extend(failure);
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.join();
    }
    std::mem::take(&mut *outcome.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Runs one job and prints what it said, whole, once it has ended.
fn run_one(Job { name, mut command }: Job) -> (u64, u64, Option<String>) {
    let started = std::time::Instant::now();
    let output = match command.stdin(Stdio::null()).output() {
        Ok(output) => output,
        Err(error) => {
            println!("     Running {name}: cannot run it: {error}");
            return (0, 0, Some(format!("{name} (cannot run it)")));
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (mut passed, mut failed) = (0, 0);
    for counts in stdout.lines().filter_map(|line| line.strip_prefix("test result: ")) {
        passed += toolchain::count_before(counts, " passed");
        failed += toolchain::count_before(counts, " failed");
    }
    // One print, so that the binaries' outputs never interleave.
    let seconds = started.elapsed().as_secs_f64();
    print!(
        "     Running {name}, {seconds:.1} s\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let failure = (!output.status.success()).then(|| format!("{name} ({})", output.status));
    (passed, failed, failure)
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_binaries_are_read_from_cargo_messages() {
        let integration = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/code-runtime-cli#0.0.0","manifest_path":"/w/code-runtime-cli/Cargo.toml","target":{"kind":["test"],"name":"it"},"profile":{"opt_level":"0","test":true},"executable":"/w/target/debug/deps/it-1"}"#;
        let binary = super::test_binary(integration).unwrap();
        assert_eq!(binary.path, std::path::Path::new("/w/target/debug/deps/it-1"));
        assert_eq!(binary.package, "code-runtime-cli");
        assert!(!binary.unit);
        let named = integration.replace("code-runtime-cli#0.0.0", "x#code-runtime-cli@0.0.0");
        assert_eq!(super::test_binary(&named).unwrap().package, "code-runtime-cli");
        let unit = integration.replace(r#""kind":["test"]"#, r#""kind":["lib"]"#);
        assert!(super::test_binary(&unit).unwrap().unit);
        // A binary built for the integration tests is no test harness.
        let bin = integration.replace(r#""test":true"#, r#""test":false"#);
        assert!(super::test_binary(&bin).is_none());
        assert!(super::test_binary(r#"{"reason":"build-finished","success":true}"#).is_none());
    }

    #[test]
    fn target_selecting_arguments_skip_the_doc_tests() {
        assert!(super::selects_targets(&["--package", "conformance", "--test", "it"]));
        assert!(super::selects_targets(&["--test=it"]));
        assert!(!super::selects_targets(&["--workspace", "--locked"]));
    }
}

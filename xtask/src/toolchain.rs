//! Running cargo from xtask, with the environment the workspace needs offline.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The offline V8 static library that `../shared/v8/README.md` describes, relative to the project
/// root. The `v8` crate reads its path from `RUSTY_V8_ARCHIVE` instead of downloading.
const OFFLINE_V8_ARCHIVE: &str = "../shared/v8/librusty_v8_release_x86_64-unknown-linux-gnu.a.gz";

/// The profile every test build of xtask's names: `dev`, whose settings `test` inherits, so that
/// the tests, the command they run and the wheel's extension (which maturin builds with `dev`)
/// share one set of compiled dependencies. Under `test`, the wheel would compile them all again.
pub(crate) const TEST_PROFILE: [&str; 2] = ["--profile", "dev"];

/// The workspace root (the parent of this crate's directory).
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Runs `cargo ARGS` in the project root and fails if it fails.
///
/// `RUSTY_V8_ARCHIVE` is exported when the offline library exists and the caller has not set it,
/// so the README's commands work without internet while a user with internet builds with plain
/// `cargo`.
pub(crate) fn cargo(args: &[&str]) -> Result<(), String> {
    let status =
        cargo_command(args).status().map_err(|error| format!("cannot run cargo: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

/// Runs `cargo ARGS` and returns what it printed on stdout (its stderr passes through).
pub(crate) fn cargo_output(args: &[&str]) -> Result<String, String> {
    let output = cargo_command(args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !output.status.success() {
        return Err(format!("`cargo {}` failed ({})", args.join(" "), output.status));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs `cargo test ARGS`, passing its output through, and closes with one line totalling every
/// test binary's `test result:` line: `tests: N passed, N failed`.
///
/// The total makes a run that executed no test visible at a glance (cargo's own last line is often
/// the `0 passed` of a crate without doctests).
pub(crate) fn cargo_test(args: &[&str]) -> Result<(), String> {
    let (passed, failed) = cargo_test_counted(&[&["test"], &TEST_PROFILE[..], args].concat())?;
    println!("tests: {passed} passed, {failed} failed");
    if passed == 0 {
        return Err("no test ran".to_owned());
    }
    Ok(())
}

/// Runs `cargo ARGS` (a `cargo test`), passing its output through: the tests passed and failed,
/// or why it failed.
pub(crate) fn cargo_test_counted(args: &[&str]) -> Result<(u64, u64), String> {
    let mut child = cargo_command(args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    let (mut passed, mut failed) = (0u64, 0u64);
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|error| format!("reading cargo's output: {error}"))?;
            println!("{line}");
            if let Some(counts) = line.strip_prefix("test result: ") {
                passed += count_before(counts, " passed");
                failed += count_before(counts, " failed");
            }
        }
    }
    let status = child.wait().map_err(|error| format!("waiting for cargo: {error}"))?;
    if !status.success() {
        return Err(format!("`cargo {}` failed ({status})", args.join(" ")));
    }
    Ok((passed, failed))
}

/// The number just before `label` in a `test result:` summary such as
/// `ok. 81 passed; 0 failed; 0 ignored; …`.
pub(crate) fn count_before(summary: &str, label: &str) -> u64 {
    summary
        .split([';', '.'])
        .find_map(|part| part.trim().strip_suffix(label.trim_start()))
        .and_then(|number| number.trim().parse().ok())
        .unwrap_or(0)
}

pub(crate) fn cargo_command(args: &[&str]) -> Command {
    let root = project_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    #[expect(clippy::disallowed_methods, reason = "xtask runs cargo, not a Python child")]
    let mut command = Command::new(cargo);
    command.args(args).current_dir(&root);
    offline_v8(&mut command);
    command
}

/// Points `command` (cargo, or a tool that runs cargo) at the offline V8 library when it exists
/// and the caller has not named one.
pub(crate) fn offline_v8(command: &mut Command) {
    if let Some(archive) = offline_v8_archive() {
        command.env("RUSTY_V8_ARCHIVE", archive);
    }
}

/// The offline V8 library, when it exists and the caller has not named one.
pub(crate) fn offline_v8_archive() -> Option<PathBuf> {
    if std::env::var_os("RUSTY_V8_ARCHIVE").is_some() {
        return None;
    }
    project_root().join(OFFLINE_V8_ARCHIVE).canonicalize().ok()
}

// SAFETY: `geteuid(2)` as the C library declares it; it has no preconditions. (xtask has no
// dependencies, so not through the `libc` crate.)
unsafe extern "C" {
    pub(crate) safe fn geteuid() -> u32;
}

//! `cargo xtask test --stress N [ARGS]`: the test command N times over, with CPU hogs beside it,
//! and every test that failed even once named at the end.
//!
//! CI meets a flaky test once in a while; a flaky test costs a whole submission. Busy neighbours
//! (one spinning thread per core, plus one) stretch every race window the way a loaded CI
//! machine does, and N rounds give each window N chances.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::toolchain;

/// Runs `cargo test ARGS` `rounds` times with hogs running, and reports.
pub(crate) fn run(rounds: u32, args: &[String]) -> Result<(), String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Built once, before the hogs start, so the rounds measure the tests and not the compiler.
    toolchain::cargo(&[&["test", "--no-run"], &args[..]].concat())?;
    let stop = Arc::new(AtomicBool::new(false));
    let hogs = std::thread::available_parallelism().map_or(1, |n| n.get()) + 1;
    let spinning: Vec<_> = (0..hogs)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let mut failures: BTreeMap<String, u32> = BTreeMap::new();
    let mut outcome = Ok(());
    for round in 1..=rounds {
        println!("stress: round {round} of {rounds}, {hogs} CPU hogs beside it");
        match round_failures(&args) {
            Ok(failed) => {
                for (name, said) in failed {
                    println!("stress: {name} failed in round {round}:\n{said}");
                    *failures.entry(name).or_default() += 1;
                }
            }
            Err(why) => {
                outcome = Err(why);
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for hog in spinning {
        let _ = hog.join();
    }
    outcome?;
    if failures.is_empty() {
        println!("stress: {rounds} rounds, no test failed");
        return Ok(());
    }
    println!("stress: tests that failed at least once in {rounds} rounds:");
    for (name, times) in &failures {
        println!("  {name}: {times} of {rounds}");
    }
    Err(format!("{} tests failed under stress", failures.len()))
}

/// One `cargo test` round: the tests that failed (`binary: module::test`), each with what it
/// printed (its panic message first).
fn round_failures(args: &[&str]) -> Result<Vec<(String, String)>, String> {
    let mut child = toolchain::cargo_command(&[&["test"], args].concat())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    // cargo names each binary on stderr (`Running tests/it/main.rs (target/…/it-…)`) and the
    // tests print on stdout: read both, the binary's name prefixing its failures.
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let binaries = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| Some(line.trim().strip_prefix("Running ")?.to_owned()))
            .collect::<Vec<String>>()
    });
    let mut failed = Vec::new();
    let mut said: BTreeMap<String, String> = BTreeMap::new();
    let mut binary = 0usize;
    // The test whose captured output is being read (`---- name stdout ----`).
    let mut reading: Option<String> = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("running ") {
                binary += 1;
            }
            if let Some(name) =
                line.strip_prefix("test ").and_then(|rest| rest.strip_suffix(" ... FAILED"))
            {
                failed.push((binary, name.to_owned()));
            }
            if let Some(name) =
                line.strip_prefix("---- ").and_then(|rest| rest.strip_suffix(" stdout ----"))
            {
                reading = Some(name.to_owned());
                continue;
            }
            if line == "failures:" || line.starts_with("test result:") {
                reading = None;
            }
            if let Some(name) = &reading {
                let text = said.entry(name.clone()).or_default();
                // The panic and a few lines after it tell why; the backtrace does not.
                if text.lines().count() < 12 {
                    text.push_str("    ");
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        }
    }
    let _ = child.wait().map_err(|error| format!("waiting for cargo: {error}"))?;
    let binaries = binaries.join().unwrap_or_default();
    Ok(failed
        .into_iter()
        .map(|(index, name)| {
            let text = said.remove(&name).unwrap_or_default();
            let binary = index.checked_sub(1).and_then(|index| binaries.get(index));
            match binary {
                Some(binary) => (format!("{binary}: {name}"), text),
                None => (name, text),
            }
        })
        .collect())
}

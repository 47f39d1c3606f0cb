//! Measures the Python provider against its bars (DESIGN.md §7), with the bare interpreter start
//! measured in the same run as the baseline. `cargo xtask bench` runs it in release mode.
//!
//! Usage: `bench [--quick] [--json]`.
#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::time::{Duration, Instant};

use code_runtime::{CodeBindingNamespace, CodeRunRequest, CodeRuntime, binding};
use code_runtime_python::{PythonCodeRuntime, PythonConfig};
use futures::future::join_all;
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let as_json = args.iter().any(|arg| arg == "--json");
    let tokio =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let runtime = PythonCodeRuntime::new(PythonConfig::default()).expect("python3 starts");
    let trivial_n = if quick { 60 } else { 300 };

    // Warm the page cache and the interpreter's files once.
    for _ in 0..5 {
        bare_start(runtime.executable());
        tokio.block_on(runtime.run(CodeRunRequest::new("return 1"))).expect("valid request");
    }
    // Interleave the two measurements so machine noise hits both alike.
    let mut bare = Vec::with_capacity(trivial_n);
    let mut trivial = Vec::with_capacity(trivial_n);
    for _ in 0..trivial_n {
        bare.push(bare_start(runtime.executable()));
        let start = Instant::now();
        let result =
            tokio.block_on(runtime.run(CodeRunRequest::new("return 1"))).expect("valid request");
        trivial.push(start.elapsed());
        assert!(result.is_ok(), "{}", result.to_json());
    }

    let tools = CodeBindingNamespace::new("tools")
        .function("echo", binding(|args| async move { Ok(args) }));
    let rtt_program = "import time\nstart = time.perf_counter()\nfor i in range(1000):\n    await tools.echo(i)\nreturn (time.perf_counter() - start) * 1000"; // µs per call
    let mut rtt = Vec::new();
    for _ in 0..if quick { 3 } else { 10 } {
        let result = tokio
            .block_on(runtime.run(CodeRunRequest::new(rtt_program).binding(tools.clone())))
            .expect("valid");
        rtt.push(Duration::from_secs_f64(
            result.value().and_then(|v| v.as_f64()).expect("a number") / 1e6,
        ));
    }

    let fanout =
        "calls = [tools.echo(i) for i in range(20)]\nreturn sum([await call for call in calls])";
    let start = Instant::now();
    let results = tokio.block_on(join_all(
        (0..100).map(|_| runtime.run(CodeRunRequest::new(fanout).binding(tools.clone()))),
    ));
    let fanout_seconds = start.elapsed().as_secs_f64();
    let fanout_ok =
        results.iter().filter(|r| r.as_ref().is_ok_and(|r| r.value() == Some(&json!(190)))).count();

    let idle_mb = tokio.block_on(idle_memory(&runtime));

    let (bare_p50, _) = percentiles(&mut bare);
    let (trivial_p50, trivial_p99) = percentiles(&mut trivial);
    let (rtt_p50, _) = percentiles(&mut rtt);
    let ratio = trivial_p50.as_secs_f64() / bare_p50.as_secs_f64();
    if as_json {
        let report = json!({
            "python": {
                "trivial_run_ms": {"p50": ms(trivial_p50), "p99": ms(trivial_p99), "n": trivial.len(), "mode": "fresh process per run"},
                "binding_rtt_us": {"p50": rtt_p50.as_secs_f64() * 1e6, "n": rtt.len() * 1000},
                "fanout_100x20": {"ok": fanout_ok, "failed": 100 - fanout_ok, "seconds": fanout_seconds},
                "idle_run_rss_mb": idle_mb,
            },
            "baselines": {"python_bare_start_ms": {"p50": ms(bare_p50), "n": bare.len()}},
            "ratios": {"py_trivial_vs_bare_python": ratio},
        });
        println!("{report}");
    } else {
        println!(
            "python provider ({}, containment {:?})",
            runtime.executable().display(),
            runtime.containment()
        );
        println!(
            "  trivial run (fresh process)  p50 {:>8.2} ms   p99 {:>8.2} ms   n {}",
            ms(trivial_p50),
            ms(trivial_p99),
            trivial.len()
        );
        println!(
            "  baseline python3 -I -S -c pass p50 {:>6.2} ms   n {}",
            ms(bare_p50),
            bare.len()
        );
        println!("  ratio trivial / bare         {ratio:>8.2}x   (bar: <= 1.5x)");
        println!(
            "  binding round trip           p50 {:>8.2} us   (bar: <= 60 us)",
            rtt_p50.as_secs_f64() * 1e6
        );
        println!(
            "  100 runs x 20-call fan-out   {fanout_ok} ok, {} failed, {fanout_seconds:.2} s",
            100 - fanout_ok
        );
        println!(
            "  memory per idle live run     {idle_mb:.2} MB (proportional set size of its processes)"
        );
    }
    tokio.block_on(runtime.dispose());
}

fn bare_start(executable: &std::path::Path) -> Duration {
    #[expect(
        clippy::disallowed_methods,
        reason = "the baseline is the bare interpreter, outside the provider"
    )]
    let mut command = std::process::Command::new(executable);
    command.args(["-I", "-S", "-c", "pass"]).env_clear();
    let start = Instant::now();
    let status = command.status().expect("python3 starts");
    assert!(status.success());
    start.elapsed()
}

/// Proportional memory of 20 live runs that wait on a binding, per run.
async fn idle_memory(runtime: &PythonCodeRuntime) -> f64 {
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let waiting = gate.clone();
    let tools = CodeBindingNamespace::new("tools").function(
        "wait",
        binding(move |_| {
            let waiting = waiting.clone();
            async move {
                waiting.notified().await;
                Ok(json!(1))
            }
        }),
    );
    let before = descendants_pss_kb();
    let runs: Vec<_> = (0..20)
        .map(|_| {
            let runtime = runtime.clone();
            let request = CodeRunRequest::new("return await tools.wait({})").binding(tools.clone());
            tokio::spawn(async move { runtime.run(request).await })
        })
        .collect();
    // Let every child start and block on its call.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during = descendants_pss_kb();
    gate.notify_waiters();
    for run in runs {
        let _ = run.await;
    }
    (during.saturating_sub(before)) as f64 / 1024.0 / 20.0
}

/// The summed proportional set size of this process's children and grandchildren, in KiB.
fn descendants_pss_kb() -> u64 {
    let children = |pid: u32| -> Vec<u32> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
            .flat_map(|list| {
                list.split_whitespace().filter_map(|pid| pid.parse().ok()).collect::<Vec<_>>()
            })
            .collect()
    };
    let pss = |pid: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|line| line.starts_with("Pss:"))
                    .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    };
    children(std::process::id())
        .into_iter()
        .map(|child| pss(child) + children(child).into_iter().map(pss).sum::<u64>())
        .sum()
}

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

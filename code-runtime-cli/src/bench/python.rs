//! The figures only Python has: the wall clock under floods of output, what a program's imports
//! add, a preloaded pandas, and what each layer of the sandbox costs a cold start. Each needs a
//! Python program or a `PythonConfig` of its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runtime::json;
use code_runtime::json::JsonValue;
use code_runtime::{CodeRunRequest, CodeRuntime, Language};
use code_runtime_providers::ProviderSpec;
use code_runtime_python::{PythonCodeRuntime, PythonConfig, SandboxOptions};
use futures::future::join_all;

use crate::bench::figures::{WARM_PAUSE, runs};
use crate::bench::memory::idle_memory;
use crate::bench::{ms, percentiles};

/// When a run's 2 s wall clock answers while two other runs flood the host with 100 MB lines on
/// fd 3 (the bar: within 2.5 s): no run delays another, whatever it sends (docs/design.md §8).
pub(super) async fn wall_clock_under_floods(runtime: &Arc<dyn CodeRuntime>) -> JsonValue {
    let flood = "import os\nchunk = b'x' * (1 << 20)\nwhile True:\n    for _ in range(100):\n        os.write(3, chunk)\n    os.write(3, b'\\n')";
    let limits = |ms| code_runtime::RunLimits { max_wall_ms: Some(ms), ..Default::default() };
    let floods: Vec<_> =
        (0..2).map(|_| runtime.run(CodeRunRequest::new(flood).limits(limits(4_000)))).collect();
    let sleeper = async {
        // The floods are under way first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        let result = runtime
            .run(CodeRunRequest::new("import time\ntime.sleep(30)").limits(limits(2_000)))
            .await;
        let ok = result.is_ok_and(|result| {
            result.error().is_some_and(|error| error.kind() == code_runtime::FailureKind::Timeout)
        });
        (started.elapsed(), ok)
    };
    let (_, (elapsed, ok)) = futures::join!(join_all(floods), sleeper);
    json!({"ms": ms(elapsed), "timed_out_as_asked": ok, "bar_ms": 2500})
}

/// Runs whose programs start with the imports agent programs make, beside `return 1`, the three
/// taken in turn in one loop so the machine's noise falls on each alike, each after the pause of a
/// warm run: what a program's imports add to a run whose cell is ready. Back to back, each run
/// would also wait for the spare the run before it took, which favours the program after the
/// slowest (the trivial one, in this order) and measures the spares' pace instead. The bar:
/// `import asyncio, json, re, datetime` within 1.5 ms of the trivial run (p50), which the
/// zygote's preloaded standard modules make possible.
pub(super) async fn import_runs(runtime: &Arc<dyn CodeRuntime>, samples: usize) -> JsonValue {
    const PROGRAMS: [(&str, &str); 3] = [
        ("trivial", "return 1"),
        ("asyncio_json", "import asyncio, json\nreturn 1"),
        ("asyncio_json_re_datetime", "import asyncio, json, re, datetime\nreturn 1"),
    ];
    let mut times: [Vec<Duration>; 3] = Default::default();
    for round in 0..samples + 5 {
        for ((_, program), times) in PROGRAMS.iter().zip(&mut times) {
            tokio::time::sleep(WARM_PAUSE).await;
            let start = Instant::now();
            let result = runtime.run(CodeRunRequest::new(*program)).await;
            assert!(result.is_ok_and(|r| r.is_ok()), "a run of the bench failed: {program}");
            // The first five warm up.
            if round >= 5 {
                times.push(start.elapsed());
            }
        }
    }
    let mut figures = json!({
        "mode": "each program in turn; a fresh cell per run, made ahead of it, 50 ms between runs",
    });
    for ((name, _), times) in PROGRAMS.iter().zip(&mut times) {
        let (p50, p99) = percentiles(times);
        figures[*name] = json!({"p50": ms(p50), "p99": ms(p99), "n": samples});
    }
    let p50 = |name: &str| figures[name]["p50"].as_f64().unwrap_or(f64::NAN);
    figures["over_trivial_ms"] = json!(p50("asyncio_json_re_datetime") - p50("trivial"));
    figures
}

/// A program that builds a 1 000-row DataFrame and sums a column, on a provider that preloads
/// pandas (docs/design.md §18), beside that provider's trivial run (the bar: 2x) and the memory of
/// its runs waiting on a call beside the same without preload (the bar: within 2 MB). Reported as
/// skipped when the interpreter has no pandas.
pub(super) async fn preloaded_pandas(base: &PythonConfig, samples: usize) -> JsonValue {
    const PROGRAM: &str =
        "import pandas as pd\ndf = pd.DataFrame({'a': range(1000)})\nreturn int(df['a'].sum())";
    let preload = PythonConfig { preload: vec!["pandas".to_owned()], ..base.clone() };
    let preloaded: Arc<dyn CodeRuntime> = match PythonCodeRuntime::new(preload) {
        Ok(runtime) => Arc::new(runtime),
        Err(error) => return json!({"skipped": error.to_string()}),
    };
    let (trivial, _) = runs(&preloaded, "return 1", samples, Duration::ZERO).await;
    let (p50, p99) = runs(&preloaded, PROGRAM, samples, Duration::ZERO).await;
    let idle = idle_memory(&preloaded).await;
    preloaded.dispose().await;
    let plain: Arc<dyn CodeRuntime> = match PythonCodeRuntime::new(base.clone()) {
        Ok(runtime) => Arc::new(runtime),
        Err(error) => return json!({"skipped": error.to_string()}),
    };
    let plain_idle = idle_memory(&plain).await;
    plain.dispose().await;
    json!({
        "dataframe_run_ms": {"p50": ms(p50), "p99": ms(p99), "n": samples},
        "trivial_run_ms": {"p50": ms(trivial), "n": samples},
        "ratio_vs_trivial": ms(p50) / ms(trivial),
        "idle_run_rss_mb": idle,
        "idle_run_rss_mb_without": plain_idle,
        "mode": "pandas preloaded in the zygote; a 1 000-row DataFrame built and a column summed, back to back",
    })
}

/// What each layer of the sandbox costs a trivial Python run that starts its own cell (no warm
/// cell): its p50 with no layer, each layer alone, and all of them (`all` is the cold start). A combination this machine cannot run (a root host without
/// namespaces runs programs as a uid of their own, which may not reach an interpreter under
/// `/root`) is reported with its error.
pub(super) async fn sandbox_layers(samples: usize) -> JsonValue {
    let none =
        SandboxOptions { namespaces: false, landlock: false, seccomp: false, require: false };
    let mut figures = json!({});
    for (name, options) in [
        ("none", none),
        ("seccomp", SandboxOptions { seccomp: true, ..none }),
        ("landlock", SandboxOptions { landlock: true, ..none }),
        ("namespaces", SandboxOptions { namespaces: true, ..none }),
        ("all", SandboxOptions::default()),
    ] {
        let spec = ProviderSpec { resident: false, ..ProviderSpec::new(Language::Python) };
        let runtime =
            match PythonCodeRuntime::new(PythonConfig { sandbox: options, ..spec.python_config() })
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    figures[name] = json!({"error": error.to_string()});
                    continue;
                }
            };
        let _ = runtime.run(CodeRunRequest::new("return 1")).await;
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples {
            let start = Instant::now();
            let _ = runtime.run(CodeRunRequest::new("return 1")).await;
            times.push(start.elapsed());
        }
        figures[name] = json!({"p50": ms(percentiles(&mut times).0), "n": samples});
    }
    figures
}

//! `code-runtime bench`: the figures of DESIGN.md §7 for each provider, with the baselines
//! measured in the same run (CLI.md).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runtime::json;
use code_runtime::json::JsonValue;
use code_runtime::{
    ApprovalRule, Approvals, CheckpointKey, CodeBindingNamespace, CodeRunRequest, CodeRuntime,
    Decision, Decisions, Isolation, Language, binding,
};
use code_runtime_providers::{ProviderSpec, PythonSetup};
use code_runtime_python::{PythonCodeRuntime, PythonConfig, SandboxOptions};
use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};
use futures::future::join_all;

use crate::Failure;

/// `code-runtime bench`'s options (CLI.md).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The providers to measure.
    #[arg(long, value_name = "LANGUAGE", default_value = "all",
          value_parser = ["typescript", "python", "all"])]
    language: String,
    /// A smaller sample: under a minute in all.
    #[arg(long)]
    quick: bool,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// The interpreter of the Python figures, possibly a virtual environment's [default:
    /// python3]; when it imports pandas, a preloaded pandas is measured too.
    #[arg(long, value_name = "PATH")]
    python: Option<std::path::PathBuf>,
}

pub(crate) fn main(args: &Args) -> Result<ExitCode, Failure> {
    let (language, quick, as_json) = (args.language.as_str(), args.quick, args.json);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?;
    let samples = if quick { 60 } else { 300 };
    let mut report = json!({"baselines": {}, "ratios": {}});

    // Python first: every run forks this process, and a fork copies the page tables of whatever
    // V8 has mapped here by then, which adds milliseconds per Python run once TypeScript ran.
    if language != "typescript" {
        let spec = ProviderSpec {
            python: PythonSetup { interpreter: args.python.clone(), preload: Vec::new() },
            ..ProviderSpec::new(Language::Python)
        };
        spec.check()?;
        let base = spec.python_config();
        python_figures(&tokio, &base, (samples, quick), &mut report)?;
    }
    if language != "python" {
        typescript_figures(&tokio, samples, quick, &mut report)?;
    }
    let oneshots = if quick { 10 } else { 30 };
    for (key, run) in [("typescript", language != "python"), ("python", language != "typescript")] {
        if run {
            report["cli_oneshot_ms"][key] = cli_oneshot(key, oneshots)
                .map_or(JsonValue::Null, |p50| json!({"p50": p50, "n": oneshots}));
        }
    }
    let bare = report["baselines"]["python_bare_start_ms"]["p50"].as_f64();
    if let (Some(oneshot), Some(bare)) = (report["cli_oneshot_ms"]["python"]["p50"].as_f64(), bare)
    {
        report["ratios"]["py_cli_oneshot_vs_bare_python"] = json!(oneshot / bare);
    }
    if as_json {
        crate::print_stdout(&json::encode(&report));
    } else {
        crate::print_stdout(&table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// The Python figures, and the bare interpreter's start as their baseline.
fn python_figures(
    tokio: &tokio::runtime::Runtime,
    base: &PythonConfig,
    (samples, quick): (usize, bool),
    report: &mut JsonValue,
) -> Result<(), Failure> {
    // The figures of the table in the default configuration: a cell per run, forked from the
    // zygote, two forked ahead of the runs (one started ahead without a zygote).
    let python = PythonCodeRuntime::new(base.clone())?;
    let zygote = python.containment().zygote;
    let bare = bare_python(python.executable(), samples);
    let runtime: Arc<dyn CodeRuntime> = Arc::new(python);
    let mut figures = tokio.block_on(measure(&runtime, samples, quick));
    figures["trivial_run_ms"]["mode"] = json!(if zygote {
        "a fresh cell per run, forked from the zygote (two forked ahead), back to back"
    } else {
        "a fresh cell per run (one started ahead; no zygote on this machine), back to back"
    });
    report["baselines"]["python_bare_start_ms"] = json!({"p50": bare, "n": samples});
    report["ratios"]["py_trivial_vs_bare_python"] =
        json!(figures["trivial_run_ms"]["p50"].as_f64().unwrap_or(0.0) / bare);
    // With the pause an agent's runs have between them (the model's turn), a run finds its cell
    // forked and its interpreter waiting.
    let (p50, p99) = tokio.block_on(trivial_runs(&runtime, samples / 3, WARM_PAUSE));
    figures["trivial_run_warm_ms"] = json!({
        "p50": ms(p50), "p99": ms(p99), "n": samples / 3,
        "mode": "a fresh cell per run, made ahead of it, 50 ms between runs",
    });
    figures["wall_clock_under_floods_ms"] = tokio.block_on(wall_clock_under_floods(&runtime));
    figures["import_run_ms"] = tokio.block_on(import_runs(&runtime, samples / 3));
    drop(runtime);
    // None made ahead: each run waits for its fork of the zygote.
    if zygote {
        let forked = PythonConfig { warm_cell: false, ..base.clone() };
        let forked: Arc<dyn CodeRuntime> = Arc::new(PythonCodeRuntime::new(forked)?);
        let (p50, p99) = tokio.block_on(trivial_runs(&forked, samples / 3, Duration::ZERO));
        figures["trivial_run_forked_ms"] = json!({
            "p50": ms(p50), "p99": ms(p99), "n": samples / 3,
            "mode": "a fresh cell per run, forked from the zygote as the run starts, back to back",
        });
        report["ratios"]["py_forked_trivial_vs_bare_python"] = json!(ms(p50) / bare);
    }
    // Without the zygote: each cell starts its interpreter.
    let scratch = PythonConfig { warm_cell: false, zygote: false, ..base.clone() };
    let scratch: Arc<dyn CodeRuntime> = Arc::new(PythonCodeRuntime::new(scratch)?);
    let (p50, p99) = tokio.block_on(trivial_runs(&scratch, samples / 3, Duration::ZERO));
    drop(scratch);
    figures["trivial_run_scratch_ms"] = json!({
        "p50": ms(p50), "p99": ms(p99), "n": samples / 3,
        "mode": "a fresh cell started from scratch for each run (no zygote), back to back",
    });
    report["ratios"]["py_scratch_trivial_vs_bare_python"] = json!(ms(p50) / bare);
    figures["sandbox_layers_ms"] = tokio.block_on(sandbox_layers(samples / 3));
    figures["preload_pandas"] = tokio.block_on(preloaded_pandas(base, samples / 3));
    report["python"] = figures;
    Ok(())
}

/// The TypeScript figures in both isolation modes, and a Node worker's start as their baseline.
fn typescript_figures(
    tokio: &tokio::runtime::Runtime,
    samples: usize,
    quick: bool,
    report: &mut JsonValue,
) -> Result<(), Failure> {
    let node = node_worker_spawn(if quick { 20 } else { 60 });
    report["baselines"]["node_worker_spawn_ms"] = node
        .as_ref()
        .map_or(JsonValue::Null, |p50| json!({"p50": p50, "n": if quick { 20 } else { 60 }}));
    for (key, isolation, ratio) in [
        ("typescript", Isolation::Process, "ts_trivial_vs_node_worker"),
        ("typescript_thread", Isolation::Thread, "ts_thread_trivial_vs_node_worker"),
    ] {
        // This executable serves the cells (`main` calls `serve_cell_if_asked`).
        let spec =
            ProviderSpec { isolation: Some(isolation), ..ProviderSpec::new(Language::TypeScript) };
        let config = spec.worker_thread_config();
        let runtime: Arc<dyn CodeRuntime> = Arc::new(WorkerThreadCodeRuntime::new(config.clone())?);
        let mut figures = tokio.block_on(measure(&runtime, samples, quick));
        figures["trivial_run_ms"]["mode"] = json!(match isolation {
            Isolation::Thread =>
                "a fresh isolate per run on a thread of this process (two made ahead), back to back",
            _ => "a fresh isolate per run in a fresh cell (two started ahead), back to back",
        });
        if isolation == Isolation::Process {
            let (p50, p99) = tokio.block_on(trivial_runs(&runtime, samples / 3, WARM_PAUSE));
            figures["trivial_run_warm_ms"] = json!({
                "p50": ms(p50), "p99": ms(p99), "n": samples / 3,
                "mode": "a fresh cell per run, started ahead of it (warm_cell), 50 ms between runs",
            });
            // The same back to back, each cell a clone of this process rather than of the
            // spawner process (which starts them by default).
            let config = WorkerThreadConfig { spawner_process: false, ..config };
            let in_host: Arc<dyn CodeRuntime> = Arc::new(WorkerThreadCodeRuntime::new(config)?);
            let (p50, p99) = tokio.block_on(trivial_runs(&in_host, samples / 3, Duration::ZERO));
            figures["trivial_run_in_host_ms"] = json!({
                "p50": ms(p50), "p99": ms(p99), "n": samples / 3,
                "mode": "a fresh cell per run (two started ahead), each started by this process \
                         itself (no spawner process), back to back",
            });
            tokio.block_on(in_host.dispose());
        }
        if let Some(node) = node {
            report["ratios"][ratio] =
                json!(figures["trivial_run_ms"]["p50"].as_f64().unwrap_or(0.0) / node);
        }
        tokio.block_on(runtime.dispose());
        report[key] = figures;
    }
    Ok(())
}

/// When a run's 2 s wall clock answers while two other runs flood the host with 100 MB lines on
/// fd 3 (the bar: within 2.5 s): no run delays another, whatever it sends (DESIGN.md §8).
async fn wall_clock_under_floods(runtime: &Arc<dyn CodeRuntime>) -> JsonValue {
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

/// The provider figures: trivial run, binding round trip, fan-out, idle memory.
async fn measure(runtime: &Arc<dyn CodeRuntime>, samples: usize, quick: bool) -> JsonValue {
    let (p50, p99) = trivial_runs(runtime, samples, Duration::ZERO).await;

    let echo = CodeBindingNamespace::new("tools")
        .function("echo", binding(|args| async move { Ok(args.into()) }));
    let loop_program = match runtime.language() {
        Language::Python => "for i in range(1000):\n    await tools.echo(i)",
        _ => "for (let i = 0; i < 1000; i++) await tools.echo(i);",
    };
    let mut per_call = Vec::new();
    for _ in 0..if quick { 3 } else { 10 } {
        let start = Instant::now();
        let _ = runtime.run(CodeRunRequest::new(loop_program).binding(echo.clone())).await;
        per_call.push(start.elapsed().saturating_sub(p50) / 1000);
    }
    let (rtt, _) = percentiles(&mut per_call);

    let fanout = match runtime.language() {
        Language::Python => {
            "calls = [tools.echo(i) for i in range(20)]\nreturn sum([await call for call in calls])"
        }
        _ => {
            "return (await Promise.all(Array.from({ length: 20 }, (_, i) => tools.echo(i)))).reduce((a, b) => a + b, 0)"
        }
    };
    let start = Instant::now();
    let results =
        join_all((0..100).map(|_| runtime.run(CodeRunRequest::new(fanout).binding(echo.clone()))))
            .await;
    let seconds = start.elapsed().as_secs_f64();
    let ok = results
        .iter()
        .filter(|result| result.as_ref().is_ok_and(|r| r.value() == Some(&json!(190))))
        .count();

    let (approval, replay) = approval_figures(runtime, p50, quick).await;
    let web = web_figures(runtime).await;
    json!({
        "web_platform": web,
        "trivial_run_ms": {"p50": ms(p50), "p99": ms(p99), "n": samples},
        "binding_rtt_us": {"p50": rtt.as_secs_f64() * 1e6, "n": per_call.len() * 1000},
        "fanout_100x20": {"ok": ok, "failed": 100 - ok, "seconds": seconds},
        "idle_run_rss_mb": idle_memory(runtime).await,
        "approval_overhead_us": approval,
        "replay_per_call_us": replay,
    })
}

/// The web platform's globals in a TypeScript run (bar: a `new URL()` or a 1 KB encode under
/// 10 us), each timed by the program itself over 10 000 operations (`performance.now()`), so a
/// run's start is not in them; and what a run's first touch of them costs (the glue compiled),
/// the p50 of runs that touch one less the p50 of runs that do not. `null` for Python.
async fn web_figures(runtime: &Arc<dyn CodeRuntime>) -> JsonValue {
    if runtime.language() == "python" {
        return JsonValue::Null;
    }
    let timed = |program: &'static str| async move {
        let mut each = Vec::new();
        for _ in 0..5 {
            let result = runtime.run(CodeRunRequest::new(program)).await;
            if let Some(us) =
                result.ok().and_then(|result| result.value().and_then(JsonValue::as_f64))
            {
                each.push(us);
            }
        }
        each.sort_by(f64::total_cmp);
        each.get(each.len() / 2).copied().map_or(JsonValue::Null, |us| json!(us))
    };
    let url = timed("const t = performance.now(); let n = 0; for (let i = 0; i < 10000; i++) n += new URL('https://example.com/a/b?q=' + i + '#f').pathname.length; return (performance.now() - t) * 1000 / 10000").await;
    let encode = timed("const e = new TextEncoder(); const s = 'x'.repeat(1023) + 'é'; const t = performance.now(); let n = 0; for (let i = 0; i < 10000; i++) n += e.encode(s).length; return (performance.now() - t) * 1000 / 10000").await;
    // `await` included: a digest is a promise, as in every program that takes one.
    let digest = timed("const s = crypto.subtle; const d = new Uint8Array(1024).fill(7); await s.digest('SHA-256', d); const t = performance.now(); let n = 0; for (let i = 0; i < 10000; i++) n += (await s.digest('SHA-256', d)).byteLength; return (performance.now() - t) * 1000 / 10000").await;
    let runs = |program: &'static str| async move {
        let mut times = Vec::new();
        for _ in 0..30 {
            let start = Instant::now();
            let _ = runtime.run(CodeRunRequest::new(program)).await;
            times.push(start.elapsed());
        }
        percentiles(&mut times).0
    };
    let untouched = runs("return 1").await;
    let touched = runs("return typeof URL").await;
    let first_touch = touched.as_secs_f64() * 1e3 - untouched.as_secs_f64() * 1e3;
    json!({"url_parse_us": url, "text_encode_1kb_us": encode, "digest_1kb_us": digest, "first_touch_ms": first_touch, "bar_us": 10})
}

/// The web platform's line of a TypeScript table (see [`web_figures`]).
fn web_line(out: &mut String, figures: &JsonValue) {
    let Some(web) = figures.get("web_platform").filter(|web| web.get("bar_us").is_some()) else {
        return;
    };
    let number = |key: &str| web.get(key).and_then(JsonValue::as_f64).unwrap_or(f64::NAN);
    out.push_str(&format!(
        "  web: new URL()     {:>8.2} us   1 KB encode {:>6.2} us   1 KB SHA-256 digest {:>6.2} us   (bar < 10 us); first touch +{:.2} ms\n",
        number("url_parse_us"),
        number("text_encode_1kb_us"),
        number("digest_1kb_us"),
        number("first_touch_ms")
    ));
}

/// How many calls the approval figures make per run.
const CALLS: u32 = 1000;

/// What approvals cost: a call that needs approval, its approver allowing at once, over a plain
/// call (`approval_overhead_us`, bar 50: the runs' difference per call, signed, so noise shows
/// as noise); and a resume replaying 1 000 recorded calls, per replayed call
/// (`replay_per_call_us`, bar 20: the run's time less a trivial run's).
async fn approval_figures(
    runtime: &Arc<dyn CodeRuntime>,
    trivial: Duration,
    quick: bool,
) -> (JsonValue, JsonValue) {
    let echo = binding(|args| async move { Ok(args.into()) });
    let tools = |rule: Option<ApprovalRule>| {
        let marked = match rule {
            Some(rule) => echo.clone().approval(rule),
            None => echo.clone(),
        };
        CodeBindingNamespace::new("tools")
            .function("echo", marked)
            .function("gate", echo.clone().approval(ApprovalRule::Always))
    };
    let (calls, gated) = match runtime.language() {
        Language::Python => (
            "for i in range(1000):\n    await tools.echo(i)",
            "for i in range(1000):\n    await tools.echo(i)\nawait tools.gate(0)",
        ),
        _ => (
            "for (let i = 0; i < 1000; i++) await tools.echo(i);",
            "for (let i = 0; i < 1000; i++) await tools.echo(i); await tools.gate(0);",
        ),
    };
    let timed = |request: CodeRunRequest| async move {
        let start = Instant::now();
        let result = runtime.run(request).await;
        (start.elapsed(), result.ok())
    };
    let per_call_us = |time: Duration| time.as_secs_f64() * 1e6 / f64::from(CALLS);
    let rounds = if quick { 5 } else { 15 };
    let (mut overhead, mut replay) = (Vec::new(), Vec::new());
    let Ok(key) = CheckpointKey::generate() else { return (JsonValue::Null, JsonValue::Null) };
    for _ in 0..rounds {
        let (plain, _) = timed(CodeRunRequest::new(calls).binding(tools(None))).await;
        let marked = CodeRunRequest::new(calls)
            .binding(tools(Some(ApprovalRule::Always)))
            .approvals(Approvals::new(Decision::Allow));
        let (marked, _) = timed(marked).await;
        overhead.push(per_call_us(marked) - per_call_us(plain));
        let pausing = CodeRunRequest::new(gated)
            .binding(tools(None))
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key.clone()));
        let Some(checkpoint) = timed(pausing)
            .await
            .1
            .and_then(|mut result| result.take_paused())
            .map(|paused| paused.checkpoint)
        else {
            return (JsonValue::Null, JsonValue::Null);
        };
        let decisions = Decisions::new().allow(u64::from(CALLS) + 1);
        let resume = CodeRunRequest::resuming(checkpoint, decisions)
            .binding(tools(None))
            .approvals(Approvals::new(Decision::Allow).checkpoint_key(key.clone()));
        let (resumed, _) = timed(resume).await;
        replay.push(per_call_us(resumed.saturating_sub(trivial)));
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let n = rounds * CALLS as usize;
    (
        json!({"p50": median(&mut overhead), "n": n, "bar": 50}),
        json!({"p50": median(&mut replay), "n": n, "bar": 20}),
    )
}

/// The pause before each warm run: enough for the next warm cell's interpreter to start.
const WARM_PAUSE: Duration = Duration::from_millis(50);

/// p50 and p99 of `samples` runs of `return 1`, each after `pause` (not counted).
async fn trivial_runs(
    runtime: &Arc<dyn CodeRuntime>,
    samples: usize,
    pause: Duration,
) -> (Duration, Duration) {
    runs(runtime, "return 1", samples, pause).await
}

/// p50 and p99 of `program` run `samples` times, `pause` before each, after five to warm up.
async fn runs(
    runtime: &Arc<dyn CodeRuntime>,
    program: &str,
    samples: usize,
    pause: Duration,
) -> (Duration, Duration) {
    for _ in 0..5 {
        let _ = runtime.run(CodeRunRequest::new(program)).await;
    }
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        // Not `sleep(ZERO)`: tokio's timer rounds a deadline up to its next millisecond tick, so
        // runs "back to back" would each come a millisecond or so after the last one ended, time
        // in which the providers' spares get ahead (a host that runs back to back gets no such
        // pause; `python -m code_runtime.bench` compares against these figures).
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        let start = Instant::now();
        let result = runtime.run(CodeRunRequest::new(program)).await;
        times.push(start.elapsed());
        assert!(result.is_ok_and(|r| r.is_ok()), "a run of the bench failed: {program}");
    }
    percentiles(&mut times)
}

/// Runs whose programs start with the imports agent programs make, beside `return 1`, the three
/// taken in turn in one loop so the machine's noise falls on each alike, each after the pause of a
/// warm run: what a program's imports add to a run whose cell is ready. Back to back, each run
/// would also wait for the spare the run before it took, which favours the program after the
/// slowest (the trivial one, in this order) and measures the spares' pace instead. The bar:
/// `import asyncio, json, re, datetime` within 1.5 ms of the trivial run (p50), which the
/// zygote's preloaded standard modules make possible.
async fn import_runs(runtime: &Arc<dyn CodeRuntime>, samples: usize) -> JsonValue {
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
/// pandas (DESIGN.md §18), beside that provider's trivial run (the bar: 2x) and the memory of
/// its runs waiting on a call beside the same without preload (the bar: within 2 MB). Reported as
/// skipped when the interpreter has no pandas.
async fn preloaded_pandas(base: &PythonConfig, samples: usize) -> JsonValue {
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
async fn sandbox_layers(samples: usize) -> JsonValue {
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

/// The whole `code-runtime run one.ts|one.py` process, start to exit, p50 in ms (the first
/// runs, which fill the interpreter probe's cache, are not counted).
fn cli_oneshot(language: &str, samples: usize) -> Option<f64> {
    let (extension, program) = match language {
        "python" => ("py", "print('one')\nreturn 1\n"),
        _ => ("ts", "console.log('one');\nreturn 1;\n"),
    };
    let dir = std::env::temp_dir().join(format!("code-runtime-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(format!("one.{extension}"));
    std::fs::write(&path, program).ok()?;
    let executable = std::env::current_exe().ok()?;
    let mut times = Vec::with_capacity(samples);
    for round in 0..samples + 3 {
        #[expect(clippy::disallowed_methods, reason = "the whole command is what is measured")]
        let mut command = std::process::Command::new(&executable);
        command.arg("run").arg(&path).stdout(std::process::Stdio::null());
        let start = Instant::now();
        let status = command.status().ok()?;
        if round >= 3 {
            times.push(start.elapsed());
        }
        if !status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Some(ms(percentiles(&mut times).0))
}

/// Memory added per live run while 20 runs wait on a binding: the proportional set of this
/// process and of every process under it, at any depth (a TypeScript cell's V8 process under its
/// init, a Python run's interpreter under its init under the zygote's cell), before and during.
/// Shared pages are divided among their sharers, so the tree's sum counts each page once. A first
/// round of the same 20 runs, not measured, grows what this process's allocator keeps once 20
/// runs have been held (and the cells made ahead): measured in the first round, it moved the
/// TypeScript figure by up to 0.7 MB between benches.
async fn idle_memory(runtime: &Arc<dyn CodeRuntime>) -> f64 {
    waiting_runs(runtime).await;
    waiting_runs(runtime).await
}

/// One round of [`idle_memory`]: 20 runs waiting, the tree's growth per run.
async fn waiting_runs(runtime: &Arc<dyn CodeRuntime>) -> f64 {
    let gate = Arc::new(tokio::sync::Notify::new());
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
    let before = tree_pss_kb();
    let runs: Vec<_> = (0..20)
        .map(|_| {
            let runtime = runtime.clone();
            let request = CodeRunRequest::new("return await tools.wait({})").binding(tools.clone());
            tokio::spawn(async move { runtime.run(request).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during = tree_pss_kb();
    gate.notify_waiters();
    for run in runs {
        let _ = run.await;
    }
    during.saturating_sub(before) as f64 / 1024.0 / 20.0
}

/// The proportional set (`Pss`, kB) of this process and all its descendants.
fn tree_pss_kb() -> u64 {
    let pss = |pid: u32| -> u64 {
        // A process gone since it was listed holds nothing.
        std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|line| line.starts_with("Pss:"))
                    .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    };
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
    // A stack, not recursion: the tree's depth is the cells' to choose.
    let mut pending = vec![std::process::id()];
    let mut total = 0;
    while let Some(pid) = pending.pop() {
        total += pss(pid);
        pending.extend(children(pid));
    }
    total
}

/// `python3 -I -S -c pass` on the provider's interpreter, p50 in ms.
fn bare_python(executable: &Path, samples: usize) -> f64 {
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        #[expect(
            clippy::disallowed_methods,
            reason = "the baseline is the bare interpreter, outside the provider"
        )]
        let mut command = std::process::Command::new(executable);
        command.args(["-I", "-S", "-c", "pass"]).env_clear();
        let start = Instant::now();
        let _ = command.status();
        times.push(start.elapsed());
    }
    ms(percentiles(&mut times).0)
}

/// Node `worker_threads` spawn-to-first-message, p50 in ms; `None` without `node`.
fn node_worker_spawn(samples: usize) -> Option<f64> {
    const SCRIPT: &str = "const { Worker } = require('worker_threads');\n\
        const n = Number(process.argv[1]); const times = [];\n\
        (async () => { for (let i = 0; i < n; i++) { const t = process.hrtime.bigint();\n\
          await new Promise(r => { const w = new Worker(\"require('worker_threads').parentPort.postMessage(1)\", { eval: true });\n\
            w.once('message', () => { times.push(Number(process.hrtime.bigint() - t) / 1e6); w.terminate().then(r); }); }); }\n\
          times.sort((a, b) => a - b); console.log(times[Math.floor(times.length / 2)]); })();";
    #[expect(clippy::disallowed_methods, reason = "the baseline is Node itself")]
    let output = std::process::Command::new("node")
        .args(["-e", SCRIPT, &samples.to_string()])
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

/// The lines of one language's figures.
fn language_table(
    out: &mut String,
    report: &JsonValue,
    language: &str,
    figures: &JsonValue,
    (bar_trivial, bar_rtt): (&str, &str),
) {
    let number = |path: &[&str]| {
        path.iter()
            .try_fold(figures, |value, key| value.get(*key))
            .and_then(JsonValue::as_f64)
            .unwrap_or(f64::NAN)
    };
    out.push_str(&format!("{}\n", language.replace('_', " ")));
    out.push_str(&format!(
        "  trivial run        p50 {:>8.2} ms  p99 {:>8.2} ms   (bar {bar_trivial})\n",
        number(&["trivial_run_ms", "p50"]),
        number(&["trivial_run_ms", "p99"])
    ));
    out.push_str(&format!(
        "  binding round trip p50 {:>8.2} us                   (bar {bar_rtt})\n",
        number(&["binding_rtt_us", "p50"])
    ));
    out.push_str(&format!(
        "  100 x 20 fan-out   {} ok, {} failed, {:.2} s\n",
        number(&["fanout_100x20", "ok"]),
        number(&["fanout_100x20", "failed"]),
        number(&["fanout_100x20", "seconds"])
    ));
    out.push_str(&format!(
        "  idle live run      {:>8.2} MB   (the whole process tree, per run waiting on a call)\n",
        number(&["idle_run_rss_mb"])
    ));
    out.push_str(&format!(
        "  approval overhead  p50 {:>8.2} us                   (bar <= 50 us, approver allowing at once)\n",
        number(&["approval_overhead_us", "p50"])
    ));
    out.push_str(&format!(
        "  replayed call      p50 {:>8.2} us                   (bar <= 20 us, a resume of 1 000)\n",
        number(&["replay_per_call_us", "p50"])
    ));
    web_line(out, figures);
    for (key, label, note) in [
        ("trivial_run_warm_ms", "warm cell run", "(started ahead, 50 ms apart)"),
        ("trivial_run_scratch_ms", "from scratch", "(a cell started per run, no zygote)"),
        ("trivial_run_forked_ms", "forked at start", "(a zygote fork per run, none ahead)"),
        (
            "trivial_run_in_host_ms",
            "cells from host",
            "(started by the host itself, no spawner process)",
        ),
    ] {
        if figures.get(key).is_some() {
            out.push_str(&format!(
                "  {label:<19}p50 {:>8.2} ms  p99 {:>8.2} ms   {note}\n",
                number(&[key, "p50"]),
                number(&[key, "p99"])
            ));
        }
    }
    python_lines(out, figures);
    if let Some(layers) = figures.get("sandbox_layers_ms").and_then(JsonValue::as_object) {
        let listed: Vec<String> = layers
            .iter()
            .map(|(name, figure)| match figure["p50"].as_f64() {
                Some(p50) => format!("{name} {p50:.2}"),
                None => format!("{name} n/a"),
            })
            .collect();
        out.push_str(&format!("  cold start, layers p50 ms: {}\n", listed.join(", ")));
    }
    if let Some(p50) = report["cli_oneshot_ms"][language]["p50"].as_f64() {
        out.push_str(&format!("  one-shot CLI run   p50 {p50:>8.2} ms\n"));
    }
}

/// Python's own figures, those measured: a trivial run that imports the standard modules beside
/// a trivial run, and the wall clock under floods.
fn python_lines(out: &mut String, figures: &JsonValue) {
    let number = |value: &JsonValue| value.as_f64().unwrap_or(f64::NAN);
    let imports = &figures["import_run_ms"];
    if !imports.is_null() {
        out.push_str(&format!(
            "  import asyncio, json p50 {:>6.2} ms; + re, datetime p50 {:.2} ms, {:+.2} ms over \
             trivial {:.2} ms (bar <= 1.5 ms)\n",
            number(&imports["asyncio_json"]["p50"]),
            number(&imports["asyncio_json_re_datetime"]["p50"]),
            number(&imports["over_trivial_ms"]),
            number(&imports["trivial"]["p50"]),
        ));
    }
    let floods = &figures["wall_clock_under_floods_ms"];
    if !floods.is_null() {
        out.push_str(&format!(
            "  2 s wall clock     {:>8.0} ms while two runs send 100 MB lines  (bar <= 2500 ms)\n",
            number(&floods["ms"])
        ));
    }
}

/// The preloaded pandas figures (Python's), if measured.
fn preload_lines(out: &mut String, pandas: &JsonValue) {
    if let Some(why) = pandas["skipped"].as_str() {
        out.push_str(&format!("  preloaded pandas   not measured: {why}\n"));
        return;
    }
    let Some(p50) = pandas["dataframe_run_ms"]["p50"].as_f64() else { return };
    let number = |value: &JsonValue| value.as_f64().unwrap_or(f64::NAN);
    out.push_str(&format!(
        "  preloaded pandas   p50 {p50:>8.2} ms  {:.2}x its trivial run {:.2} ms (bar <= 2x; a 1 000-row DataFrame summed)\n",
        number(&pandas["ratio_vs_trivial"]),
        number(&pandas["trivial_run_ms"]["p50"]),
    ));
    out.push_str(&format!(
        "  idle, preloaded    {:>8.2} MB  without preload {:.2} MB (bar: within 2 MB)\n",
        number(&pandas["idle_run_rss_mb"]),
        number(&pandas["idle_run_rss_mb_without"]),
    ));
}

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn table(report: &JsonValue) -> String {
    let mut out = String::new();
    for (language, bar_trivial, bar_rtt) in [
        ("typescript", "<= 3 ms", "<= 40 us"),
        ("typescript_thread", "<= 2 ms", "<= 10 us"),
        ("python", "<= 3 ms or 0.35x bare", "<= 60 us"),
    ] {
        if let Some(figures) = report.get(language) {
            language_table(&mut out, report, language, figures, (bar_trivial, bar_rtt));
            preload_lines(&mut out, &figures["preload_pandas"]);
        }
    }
    let baseline = |key: &str| {
        report["baselines"].get(key).and_then(|b| b.get("p50")).and_then(JsonValue::as_f64)
    };
    out.push_str("baselines\n");
    match baseline("node_worker_spawn_ms") {
        Some(node) => out
            .push_str(&format!("  node worker_threads spawn-to-first-message p50 {node:.2} ms\n")),
        None if report.get("typescript").is_some() => out.push_str("  node: not found\n"),
        None => {}
    }
    if let Some(bare) = baseline("python_bare_start_ms") {
        out.push_str(&format!("  python3 -I -S -c pass p50 {bare:.2} ms\n"));
    }
    for (key, label) in [
        ("ts_trivial_vs_node_worker", "typescript (process) trivial / node worker"),
        ("ts_thread_trivial_vs_node_worker", "typescript (thread) trivial / node worker"),
        ("py_trivial_vs_bare_python", "python trivial / bare python"),
        ("py_forked_trivial_vs_bare_python", "python forked at start / bare python"),
        ("py_scratch_trivial_vs_bare_python", "python trivial from scratch / bare python"),
        ("py_cli_oneshot_vs_bare_python", "python one-shot CLI run / bare python"),
    ] {
        if let Some(ratio) = report["ratios"].get(key).and_then(JsonValue::as_f64) {
            out.push_str(&format!("  ratio {label}: {ratio:.2}x\n"));
        }
    }
    out.trim_end().to_owned()
}

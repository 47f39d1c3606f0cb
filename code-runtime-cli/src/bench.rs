//! `code-runtime bench`: the figures of docs/design.md §7 for each provider, with the baselines
//! measured in the same run (docs/cli.md).
//!
//! This file runs the bench: the options, and each language's figures in the order that keeps
//! them apart. What is measured is in the submodules: `figures` (every provider's), `python`
//! (Python's own), `memory`, `baselines`; `table` prints the report.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use code_runtime::json;
use code_runtime::json::JsonValue;
use code_runtime::{CodeRuntime, Isolation, Language};
use code_runtime_providers::{ProviderSpec, PythonSetup};
use code_runtime_python::{PythonCodeRuntime, PythonConfig};
use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};

use crate::Failure;

use self::baselines::{bare_python, cli_oneshot, node_worker_spawn};
use self::figures::{WARM_PAUSE, measure, trivial_runs};
use self::python::{import_runs, preloaded_pandas, sandbox_layers, wall_clock_under_floods};
use self::table::table;

mod baselines;
mod figures;
mod memory;
mod python;
mod sessions;
mod table;

/// `code-runtime bench`'s options (docs/cli.md).
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
    figures["sessions"] = tokio.block_on(sessions::session_figures(base, samples / 3));
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

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

//! `code-runtime run`: one program, one JSON result on stdout.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use code_runtime::json;
use code_runtime::{CancellationToken, CodeRunRequest, CodeRuntime, Limits};
use code_runtime_python::{PythonCodeRuntime, PythonConfig};
use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};

use crate::Misuse;
use code_runtime_cli::bindings_file::{self, Recorder};

#[derive(Debug, Default)]
struct Args {
    program: Option<String>,
    language: Option<String>,
    bindings: Option<PathBuf>,
    limits: Option<PathBuf>,
    timeout_ms: Option<u64>,
    compute_ms: Option<u64>,
    memory_mb: Option<u64>,
    max_output_bytes: Option<u64>,
    record: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Args, Misuse> {
    let mut parsed = Args::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let mut value = |flag: &str| {
            rest.next().cloned().ok_or_else(|| Misuse(format!("{flag} needs a value")))
        };
        let number = |flag: &str, text: String| {
            text.parse::<u64>()
                .map_err(|_| Misuse(format!("{flag} must be a non-negative integer, got {text}")))
        };
        match arg.as_str() {
            "--language" => parsed.language = Some(value(arg)?),
            "--bindings" => parsed.bindings = Some(value(arg)?.into()),
            "--limits" => parsed.limits = Some(value(arg)?.into()),
            "--record" => parsed.record = Some(value(arg)?.into()),
            "--timeout-ms" => parsed.timeout_ms = Some(number(arg, value(arg)?)?),
            "--compute-ms" => parsed.compute_ms = Some(number(arg, value(arg)?)?),
            "--memory-mb" => parsed.memory_mb = Some(number(arg, value(arg)?)?),
            "--max-output-bytes" => parsed.max_output_bytes = Some(number(arg, value(arg)?)?),
            flag if flag.starts_with("--") => return Err(Misuse(format!("unknown option {flag}"))),
            program if parsed.program.is_none() => parsed.program = Some(program.to_owned()),
            extra => return Err(Misuse(format!("unexpected argument {extra}"))),
        }
    }
    Ok(parsed)
}

pub(crate) fn main(args: &[String]) -> Result<ExitCode, Misuse> {
    let args = parse(args)?;
    let program_path = args.program.clone().ok_or("missing PROGRAM (a file, or - for stdin)")?;
    let language = match (&args.language, program_path.rsplit_once('.').map(|(_, ext)| ext)) {
        (Some(language), _) if language == "typescript" || language == "python" => language.clone(),
        (Some(other), _) => {
            return Err(Misuse(format!("--language must be typescript or python, got {other}")));
        }
        (None, Some("ts" | "js" | "mts")) => "typescript".to_owned(),
        (None, Some("py")) => "python".to_owned(),
        (None, _) => {
            return Err(Misuse(format!(
                "cannot tell the language of {program_path}: use --language"
            )));
        }
    };
    let program = if program_path == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|error| format!("cannot read stdin: {error}"))?;
        text
    } else {
        std::fs::read_to_string(&program_path)
            .map_err(|error| format!("cannot read {program_path}: {error}"))?
    };
    let limits = limits(&args)?;
    let recorder = Recorder::new(args.record.is_some());
    let bindings = match &args.bindings {
        Some(path) => bindings_file::load(path, &recorder).map_err(Misuse)?,
        None => Vec::new(),
    };

    let runtime: Arc<dyn CodeRuntime> = match language.as_str() {
        "python" => {
            Arc::new(PythonCodeRuntime::new(PythonConfig { limits, ..PythonConfig::default() })?)
        }
        _ => Arc::new(WorkerThreadCodeRuntime::new(WorkerThreadConfig {
            limits,
            ..WorkerThreadConfig::default()
        })?),
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start tokio: {error}"))?;
    let signal = CancellationToken::new();
    let request = CodeRunRequest { program, bindings, signal: Some(signal.clone()) };
    let result = tokio.block_on(async {
        // SIGINT and SIGTERM abort the run; the provider then stops the program and reaps it.
        let interrupted = {
            let signal = signal.clone();
            tokio::spawn(async move {
                use tokio::signal::unix::{SignalKind, signal as unix_signal};
                let (Ok(mut interrupt), Ok(mut terminate)) =
                    (unix_signal(SignalKind::interrupt()), unix_signal(SignalKind::terminate()))
                else {
                    return;
                };
                tokio::select! {
                    _ = interrupt.recv() => signal.cancel(),
                    _ = terminate.recv() => signal.cancel(),
                }
            })
        };
        let result = runtime.run(request).await;
        interrupted.abort();
        runtime.dispose().await;
        result
    })?;
    if let Some(path) = &args.record {
        let mut text = recorder.lines().join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        std::fs::write(path, text)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    crate::print_stdout(&result.to_json());
    Ok(if result.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Provider defaults, then the limits file, then the flags.
fn limits(args: &Args) -> Result<Limits, Misuse> {
    let mut limits = Limits::default();
    if let Some(path) = &args.limits {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let file = json::parse(&text)
            .map_err(|error| format!("{} is not lossless JSON: {error}", path.display()))?;
        let object = file
            .as_object()
            .ok_or_else(|| format!("{}: expected a JSON object", path.display()))?;
        for (key, value) in object {
            let number = value.as_u64().ok_or_else(|| {
                format!("{}: {key} must be a non-negative integer", path.display())
            })?;
            match key.as_str() {
                "timeoutMs" => limits.max_wall_ms = number,
                "computeMs" => limits.compute_ms = number,
                "memoryMb" => limits.max_memory_mb = number,
                "maxOutputBytes" => limits.max_output_bytes = number,
                other => {
                    return Err(Misuse(format!(
                        "{}: unknown limit {}",
                        path.display(),
                        json::quote(other)
                    )));
                }
            }
        }
    }
    limits.max_wall_ms = args.timeout_ms.unwrap_or(limits.max_wall_ms);
    limits.compute_ms = args.compute_ms.unwrap_or(limits.compute_ms);
    limits.max_memory_mb = args.memory_mb.unwrap_or(limits.max_memory_mb);
    limits.max_output_bytes = args.max_output_bytes.unwrap_or(limits.max_output_bytes);
    limits.validate()?;
    Ok(limits)
}

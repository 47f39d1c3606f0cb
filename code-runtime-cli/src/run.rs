//! `code-runtime run`: one program, one JSON result on stdout.

use std::path::PathBuf;
use std::process::ExitCode;

use code_runtime::{
    Budget, CancellationToken, CodeRunRequest, ContractError, EventSink, Isolation, Language,
    Limits, RunLimits,
};
use code_runtime_fixtures::{
    BindingsFile, DEFAULT_RECORD_BYTES, EventLog, LimitsFile, Recorder, Rotation, load_bindings,
    read_program,
};
use code_runtime_providers::{Built, ProviderSpec, PythonSetup};

use crate::Failure;
use crate::approvals::{self, CheckpointFile, Mode};

/// `code-runtime run`'s options (docs/cli.md).
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: code-runtime run examples/research.ts --bindings \
examples/research.bindings.json\n\nPython always runs in a sandbox cell; TypeScript does unless --isolation \
thread. Exit codes: 0 completed, 1 the run failed (the result's error says how), 2 misuse, 3 \
internal failure, 4 the run paused (its checkpoint is in --checkpoint FILE).")]
pub(crate) struct Args {
    /// The program file; `-` reads stdin. The program is the body of an async function: top-level
    /// `await` and `return` work.
    #[arg(value_name = "PROGRAM")]
    program: Option<String>,
    /// The program's language [default: from the extension: .ts .js .mts typescript, .py python]
    #[arg(long, value_name = "LANGUAGE", value_parser = crate::language_parser())]
    language: Option<Language>,
    #[command(flatten)]
    session: crate::session::SessionFlags,
    #[command(flatten)]
    options: Options,
}

/// The options of a run, `run`'s and `resume`'s.
#[derive(Debug, clap::Args)]
pub(crate) struct Options {
    /// JSON {"namespaces": [{"global": "tools", "errorClass": {"name": "ToolCallError",
    /// "memberNameProperty": "toolName"}, "functions": {"search": {"echo": true}}}]}. Behaviours:
    /// {"echo": true} {"reply": JSON} {"reject": "message"} {"command": ["prog", "arg"]} (the
    /// argument's JSON on stdin, its stdout's JSON resolves), each with an optional "delayMs": N; a
    /// function may add "description", "input" and "output" (JSON Schemas), "approval" (true, or
    /// {"when": JSON Schema}), a namespace "description".
    #[arg(long, value_name = "FILE")]
    bindings: Option<PathBuf>,
    /// JSON {"timeoutMs", "computeMs", "memoryMb", "maxOutputBytes", "maxCalls",
    /// "maxCallsPerFunction", "maxPendingCalls"}; the flags override it.
    #[arg(long, value_name = "FILE")]
    limits: Option<PathBuf>,
    #[command(flatten)]
    budgets: BudgetFlags,
    /// A result over the output budget is shrunk structurally (its largest strings and arrays
    /// cut first, same shape, marked) instead of failing as output-limit; the result then says
    /// "truncated": {"fromBytes", "toBytes"}. The memory budget still stops the run.
    #[arg(long)]
    truncate: bool,
    /// With --truncate (implied): shrink to about N tokens (4 bytes each) rather than to the
    /// output budget.
    #[arg(long, value_name = "N", value_parser = crate::count, allow_hyphen_values = true)]
    max_result_tokens: Option<u64>,
    /// Writes one JSON line per binding call {"namespace", "function", "args", "ok" | "error",
    /// "startedMs", "durationMs"} as calls settle (a call that needed approval adds "approval":
    /// {"decision", "by"}); nothing is kept.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// The record file's bound [default: 1073741824]: a call whose line would pass it ends the
    /// run as output-limit.
    #[arg(long, value_name = "N", value_parser = crate::count, allow_hyphen_values = true)]
    record_max_bytes: Option<u64>,
    /// Streams one JSON line per event while the program runs (`-`: stderr): log, call, settled,
    /// approval, decided, end.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// TypeScript: `process` runs the isolate in a sandbox cell, `thread` in this process (trusted
    /// programs only) [default: process]
    #[arg(long, value_name = "MODE", value_parser = isolation())]
    isolation: Option<Isolation>,
    /// Who decides the calls of functions marked "approval": ask on the terminal, deny (the
    /// program may catch the denial), allow, or pause the run (with --checkpoint) [default: deny]
    #[arg(long, value_name = "MODE", value_enum)]
    pub(crate) approvals: Option<Mode>,
    /// Where a paused run's checkpoint is written (needed with --approvals pause); the command
    /// then prints {"logs", "paused": {"checkpoint", "pending"}} and exits 4.
    #[arg(long, value_name = "FILE")]
    pub(crate) checkpoint: Option<PathBuf>,
    /// The hex key checkpoints are signed with [default: $CODE_RUNTIME_CHECKPOINT_KEY, else a key
    /// made once in the user's cache directory]
    #[arg(long, value_name = "FILE")]
    pub(crate) checkpoint_key: Option<PathBuf>,
    /// Python: the interpreter, possibly a virtual environment's, whose site-packages the cell
    /// sees read-only [default: python3]
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Python: modules imported before the program starts (in the zygote, for a server, on top
    /// of the standard modules it preloads), e.g. numpy,pandas
    #[arg(long, value_name = "MOD,..", value_delimiter = ',')]
    preload: Vec<String>,
}

pub(crate) fn main(args: Args) -> Result<ExitCode, Failure> {
    let program_path = args.program.clone().ok_or("missing PROGRAM (a file, or - for stdin)")?;
    let language = language(&args, &program_path)?;
    let mode = args.options.approvals.unwrap_or_default();
    approvals::check_mode(mode, args.options.checkpoint.as_deref(), program_path == "-")?;
    let program = read_program(&program_path)?;
    let mut request = CodeRunRequest::new(program);
    if let Some((id, sessions)) = args.session.open(args.options.checkpoint_key.as_deref())? {
        request = request.session(id).sessions(sessions);
    }
    execute(language, request, &args.options)
}

/// Runs `request` (a program, or a resumption) under `options`, prints the result, and says
/// how the command ends.
pub(crate) fn execute(
    language: Language,
    request: CodeRunRequest,
    options: &Options,
) -> Result<ExitCode, Failure> {
    let limits = limits(options)?;
    // Every output path is opened before the program starts.
    let recorder = recorder(options.record.as_deref(), options.record_max_bytes, Rotation::Stop)?;
    let events = event_log(options.events.as_deref())?;
    let bindings = match &options.bindings {
        Some(path) => load_bindings(path, &recorder)?,
        None => BindingsFile::default(),
    };
    // `run` makes one run, then exits: a cell started ahead would only be thrown away, a zygote
    // costs an interpreter's start before its fork, and a spawner process an `exec` beside the
    // run.
    let mut spec = ProviderSpec {
        isolation: options.isolation,
        python: PythonSetup {
            interpreter: options.python.clone(),
            preload: options.preload.clone(),
        },
        warm: false,
        resident: false,
        ..ProviderSpec::new(language)
    };
    spec.check().map_err(|error| Failure::Misuse(error.to_string()))?;
    // A key only where the run may pause, or resumes a checkpoint it must verify.
    let key = match (&options.checkpoint, &request.resume) {
        (None, None) => None,
        _ => Some(approvals::checkpoint_key(options.checkpoint_key.as_deref())?),
    };
    let checkpoint = options.checkpoint.as_deref().map(CheckpointFile::create).transpose()?;
    let truncate = truncation(options, &limits);
    spec.limits = if truncate.is_some() { limits.shrinking() } else { limits };
    let runtime = build(&spec)?.runtime;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::Internal(format!("cannot start tokio: {error}")))?;
    let signal = CancellationToken::new();
    let mode = options.approvals.unwrap_or_default();
    let request = CodeRunRequest {
        bindings: bindings.namespaces,
        values: bindings.values,
        call_tool: bindings.call_tool,
        signal: Some(signal.clone()),
        events: audited(events.as_ref(), &recorder),
        approvals: Some(approvals::approvals(mode, key)),
        truncate,
        ..request
    };
    let result = tokio.block_on(async {
        let interrupted = tokio::spawn(abort_on_signals(signal));
        let result = runtime.run(request).await;
        interrupted.abort();
        runtime.dispose().await;
        result
    });
    let mut result = result.map_err(|error: ContractError| Failure::Misuse(error.to_string()))?;
    let paused = match checkpoint {
        Some(file) => file.settle(&mut result)?,
        None => None,
    };
    crate::print_stdout(paused.as_deref().unwrap_or(&result.to_json()));
    written(recorder.write_error(), options.record.as_deref())?;
    written(events.as_ref().and_then(EventLog::write_error), options.events.as_deref())?;
    Ok(match (&paused, result.is_ok()) {
        (Some(_), _) => ExitCode::from(4),
        (None, true) => ExitCode::SUCCESS,
        (None, false) => ExitCode::from(1),
    })
}

/// The byte budget `--truncate` and `--max-result-tokens` shrink a result to: about 4 bytes a
/// token, else the output budget.
fn truncation(options: &Options, limits: &Limits) -> Option<usize> {
    match (options.truncate, options.max_result_tokens) {
        (_, Some(tokens)) => Some(usize::try_from(tokens.saturating_mul(4)).unwrap_or(usize::MAX)),
        (true, None) => Some(limits.output_bytes()),
        (false, None) => None,
    }
}

/// The `--events` log (`-`: stderr), opened now.
fn event_log(path: Option<&std::path::Path>) -> Result<Option<EventLog>, Failure> {
    Ok(match path {
        Some(path) if path.as_os_str() == "-" => Some(EventLog::writing(std::io::stderr())),
        Some(path) => Some(EventLog::writing(
            code_runtime_fixtures::private_file(path)
                .map_err(|error| format!("cannot write {}: {error}", path.display()))?,
        )),
        None => None,
    })
}

/// The run's event sink: the `--events` lines, and the record's line of each call the host
/// denied (a denied call never reaches its binding, which records the others).
fn audited(events: Option<&EventLog>, recorder: &Recorder) -> Option<EventSink> {
    let sinks: Vec<EventSink> =
        events.map(EventLog::sink).into_iter().chain(recorder.denials()).collect();
    match sinks.len() {
        0 => None,
        _ => Some(EventSink::new(move |event| sinks.iter().for_each(|sink| sink.deliver(event)))),
    }
}

/// A write error of an output file, as the command's internal failure.
fn written(error: Option<String>, path: Option<&std::path::Path>) -> Result<(), Failure> {
    match error {
        Some(error) => {
            let path = path.map(|path| path.display().to_string()).unwrap_or_default();
            Err(Failure::Internal(format!("cannot write {path}: {error}")))
        }
        None => Ok(()),
    }
}

/// The `--record` file's recorder (off without one), bounded by `--record-max-bytes`, doing
/// what `rotation` says when full.
pub(crate) fn recorder(
    path: Option<&std::path::Path>,
    max_bytes: Option<u64>,
    rotation: Rotation,
) -> Result<Recorder, Failure> {
    let Some(path) = path else {
        if max_bytes.is_some() {
            return Err(Failure::Misuse("--record-max-bytes needs --record".to_owned()));
        }
        return Ok(Recorder::off());
    };
    let max_bytes = max_bytes.unwrap_or(DEFAULT_RECORD_BYTES);
    Recorder::file(path, max_bytes, rotation)
        .map_err(|error| format!("cannot write {}: {error}", path.display()).into())
}

/// SIGINT and SIGTERM abort the run; the provider then stops the program and reaps it.
pub(crate) async fn abort_on_signals(signal: CancellationToken) {
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
}

/// `--language`, else the program file's extension.
fn language(args: &Args, program_path: &str) -> Result<Language, Failure> {
    match (&args.language, program_path.rsplit_once('.').map(|(_, ext)| ext)) {
        (Some(language), _) => Ok(*language),
        (None, Some("ts" | "js" | "mts")) => Ok(Language::TypeScript),
        (None, Some("py")) => Ok(Language::Python),
        (None, _) => Err(Failure::Misuse(format!(
            "cannot tell the language of {program_path}: use --language"
        ))),
    }
}

/// The provider `spec` names, with misuse told from this machine's failure: a spec no provider
/// serves, invalid limits, and an interpreter or a preload the user named that cannot serve are
/// misuse; the default Python that cannot run programs, or a sandbox this machine cannot give,
/// is the host's failure.
pub(crate) fn build(spec: &ProviderSpec) -> Result<Built, Failure> {
    spec.build().map_err(|error| {
        if error.is_invalid() || (error.is_interpreter() && spec.python.given()) {
            Failure::Misuse(error.to_string())
        } else {
            Failure::Internal(error.to_string())
        }
    })
}

/// `--isolation`'s values, by their option names.
fn isolation() -> impl clap::builder::TypedValueParser<Value = Isolation> {
    use clap::builder::TypedValueParser;
    let names = Isolation::ALL.map(Isolation::option_name);
    clap::builder::PossibleValuesParser::new(names).try_map(|name| name.parse::<Isolation>())
}

/// The budget flags, one per [`Budget`] (`--timeout-ms`, `--compute-ms`, `--memory-mb`, ..):
/// what they set overrides the limits file.
#[derive(Clone, Copy, Debug, Default)]
struct BudgetFlags(RunLimits);

impl clap::FromArgMatches for BudgetFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Self::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for budget in Budget::ALL {
            if let Some(value) = matches.get_one::<u64>(budget.name()) {
                *budget.request_slot(&mut self.0) = Some(*value);
            }
        }
        Ok(())
    }
}

impl clap::Args for BudgetFlags {
    fn augment_args(command: clap::Command) -> clap::Command {
        Budget::ALL.into_iter().fold(command, |command, budget| {
            command.arg(
                clap::Arg::new(budget.name())
                    .long(budget.flag())
                    .value_name("N")
                    .value_parser(crate::count)
                    .allow_hyphen_values(true)
                    .help(format!("{} [default: {}]", budget.about(), budget.default_value())),
            )
        })
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

/// Provider defaults, then the limits file, then the flags.
fn limits(args: &Options) -> Result<Limits, Failure> {
    let file = match &args.limits {
        Some(path) => LimitsFile::load(path)?,
        None => LimitsFile::default(),
    };
    let limits = file.apply(Limits::default()).overridden(&args.budgets.0);
    limits.validate()?;
    Ok(limits)
}

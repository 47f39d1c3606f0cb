//! The `code-runtime` command (docs/cli.md): run one program file against bindings
//! described in JSON, describe the bindings, benchmark the providers, serve code mode over MCP.
//! The command line is clap's (help for every subcommand, suggestions, completions); its errors
//! are rewritten to docs/cli.md's one line.
//!
//! Exit codes: 0 when the run completed, 1 when it failed (the result on stdout says how), 2 for
//! misuse (a bad flag, an unreadable or invalid file, invalid bindings, a forged checkpoint),
//! with one line on stderr and nothing on stdout, 3 for an internal failure (the host could not
//! do its part: no usable interpreter, a record that could not be written), with one line on
//! stderr, 4 when the run paused for a decision (its checkpoint is in a file).

mod approvals;
mod bench;
mod describe;
mod mcp;
mod resume;
mod run;
mod session;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory as _, Parser as _};

/// Why the command could not do what it was asked.
#[derive(Debug)]
enum Failure {
    /// A usage error: one line on stderr, nothing on stdout, exit code 2.
    Misuse(String),
    /// The host failed its part: one line on stderr, exit code 3.
    Internal(String),
}

/// Anything displayable is misuse unless said otherwise: usage errors are what the command's own
/// checks find.
impl<T: std::fmt::Display> From<T> for Failure {
    fn from(message: T) -> Self {
        Failure::Misuse(message.to_string())
    }
}

/// The one line of a failure, whatever its message held.
fn one_line(message: &str) -> String {
    // The library's errors name it already (`code-runtime: binding global ...`).
    let message = message.strip_prefix("code-runtime: ").unwrap_or(message);
    format!("code-runtime: {}", message.replace('\n', " "))
}

/// What a misuse message ends with when the command itself is missing or unknown.
const USAGE: &str = "usage: code-runtime run|resume|session|bench|describe|mcp|completions [OPTIONS]; \
code-runtime COMMAND --help shows its options";

/// What `code-runtime --help` ends with: where the details are. It lists the commands and no
/// more; each command's own help has its options (and `run`'s and `resume`'s, the exit codes).
const AFTER_HELP: &str = "`code-runtime COMMAND --help` shows a command's options \
(`code-runtime run --help`); docs/cli.md is the whole contract.";

/// The command line (docs/cli.md).
#[derive(Debug, clap::Parser)]
#[command(
    name = "code-runtime",
    version,
    about = "Run one LLM-written program in isolation against host bindings.",
    after_help = AFTER_HELP,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run a program file (`-` reads stdin) against bindings; prints one JSON result.
    Run(run::Args),
    /// Continue a paused run from its checkpoint, with decisions on its pending calls.
    Resume(resume::Args),
    /// Measure the providers against their baselines, measured in the same run.
    Bench(bench::Args),
    /// Print the TypeScript declarations (default) or Python stubs the model should read about
    /// the bindings.
    Describe(describe::Args),
    /// List, show or drop the sessions `run --session` keeps.
    Session(session::Args),
    /// Serve code mode over MCP (stdio, or streamable HTTP at http://ADDR/mcp): `run_code` over
    /// the config's upstream MCP servers.
    Mcp(mcp::Args),
    /// Print the completion script of SHELL.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    // The TypeScript provider starts this executable in each sandbox cell; there it serves the
    // cell's one run and exits, before anything else happens.
    code_runtime_worker_thread::serve_cell_if_asked();
    let args: Vec<OsString> = std::env::args_os().collect();
    let outcome = match parse(&args) {
        Ok(Parsed::Command(command)) => execute(*command),
        Ok(Parsed::Shown(text)) => {
            print_stdout(&text);
            Ok(ExitCode::SUCCESS)
        }
        Err(failure) => Err(failure),
    };
    match outcome {
        Ok(code) => code,
        Err(Failure::Misuse(message)) => {
            print_stderr(&one_line(&message));
            ExitCode::from(2)
        }
        Err(Failure::Internal(message)) => {
            print_stderr(&one_line(&message));
            ExitCode::from(3)
        }
    }
}

/// What the command line asks for: a command, or text to show (help, the version).
enum Parsed {
    Command(Box<Command>),
    Shown(String),
}

fn parse(args: &[OsString]) -> Result<Parsed, Failure> {
    match Cli::try_parse_from(args) {
        Ok(cli) => Ok(Parsed::Command(Box::new(cli.command))),
        Err(error) => match error.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                Ok(Parsed::Shown(error.to_string().trim_end().to_owned()))
            }
            _ => Err(Failure::Misuse(misuse(&error))),
        },
    }
}

fn execute(command: Command) -> Result<ExitCode, Failure> {
    match command {
        Command::Run(args) => run::main(args),
        Command::Resume(args) => resume::main(args),
        Command::Bench(args) => bench::main(&args),
        Command::Describe(args) => describe::main(args),
        Command::Mcp(args) => mcp::main(args),
        Command::Session(args) => session::main(args),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "code-runtime", &mut script);
            print_stdout(String::from_utf8_lossy(&script).trim_end());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// clap's error as docs/cli.md's one line: what was wrong, with a suggestion when clap has one.
fn misuse(error: &clap::Error) -> String {
    let strings = |kind| match error.get(kind) {
        Some(ContextValue::String(text)) => vec![text.clone()],
        Some(ContextValue::Strings(texts)) => texts.clone(),
        _ => Vec::new(),
    };
    let first = |kind| strings(kind).into_iter().next();
    // `--timeout-ms <N>` is the flag `--timeout-ms`; `<SHELL>` the argument SHELL.
    let arg = first(ContextKind::InvalidArg)
        .map(|arg| arg.split_whitespace().next().unwrap_or_default().to_owned())
        .map(|arg| arg.trim_start_matches('<').trim_end_matches('>').to_owned())
        .unwrap_or_default();
    let value = first(ContextKind::InvalidValue).unwrap_or_default();
    let suggestion = first(ContextKind::SuggestedArg)
        .or_else(|| first(ContextKind::SuggestedSubcommand))
        .map(|suggested| format!(" (did you mean {suggested}?)"))
        .unwrap_or_default();
    match error.kind() {
        ErrorKind::UnknownArgument if arg.starts_with('-') => {
            format!("unknown option {arg}{suggestion}")
        }
        ErrorKind::UnknownArgument => format!("unexpected argument {arg}"),
        ErrorKind::InvalidSubcommand => {
            let command = first(ContextKind::InvalidSubcommand).unwrap_or_default();
            format!("unknown command {}{suggestion} ({USAGE})", code_runtime::json::quote(&command))
        }
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            format!("missing command ({USAGE})")
        }
        ErrorKind::InvalidValue if value.is_empty() => format!("{arg} needs a value"),
        ErrorKind::InvalidValue => {
            let valid = alternatives(&strings(ContextKind::ValidValue));
            format!("{arg} must be {valid}, got {value}")
        }
        ErrorKind::ValueValidation => match std::error::Error::source(error) {
            Some(why) => format!("{arg} {why}"),
            None => format!("{arg}: invalid value {value}"),
        },
        _ => {
            // Anything else: clap's own first line, without its `error: ` prefix.
            let rendered = error.render().to_string();
            let line = rendered.lines().next().unwrap_or_default();
            line.strip_prefix("error: ").unwrap_or(line).to_owned()
        }
    }
}

/// `a`, `a or b`, `a, b or c`.
fn alternatives(values: &[String]) -> String {
    match values {
        [] => String::new(),
        [only] => only.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// A `--language` option's value: a [`Language`](code_runtime::Language) by its name.
pub(crate) fn language_parser()
-> impl clap::builder::TypedValueParser<Value = code_runtime::Language> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(
        code_runtime::Language::ALL.map(code_runtime::Language::as_str),
    )
    .try_map(|name| name.parse::<code_runtime::Language>())
}

/// A non-negative integer option's value.
pub(crate) fn count(text: &str) -> Result<u64, String> {
    text.parse().map_err(|_| format!("must be a non-negative integer, got {text}"))
}

/// Writes the command's output. A closed stdout (`code-runtime bench | head`) is not an error of
/// ours, so it is ignored rather than panicking.
fn print_stdout(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{text}");
}

#[expect(clippy::print_stderr, reason = "the CLI contract: misuse is one line on stderr")]
pub(crate) fn print_stderr(text: &str) {
    eprintln!("{text}");
}

/// Writes `text` to stderr without ending the line: a question the terminal answers on it.
#[expect(clippy::print_stderr, reason = "a question for the person at the terminal")]
pub(crate) fn print_stderr_inline(text: &str) {
    use std::io::Write;
    eprint!("{text}");
    let _ = std::io::stderr().flush();
}

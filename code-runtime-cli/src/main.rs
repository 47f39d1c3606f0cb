//! The `code-runtime` command (../shared/design/CLI.md): run one program file against bindings
//! described in JSON, or benchmark the providers.
//!
//! Exit codes: 0 when the run completed, 1 when it failed (the result on stdout says how), 2 for
//! misuse (a bad flag, an unreadable or invalid file, invalid bindings), with one line on stderr
//! and nothing on stdout, 3 for an internal failure (the host could not do its part: no usable
//! interpreter, a record that could not be written), with one line on stderr.

mod bench;
mod describe;
mod mcp;
mod run;

use std::process::ExitCode;

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

const USAGE: &str = "usage: code-runtime run PROGRAM [--language typescript|python] [--bindings FILE] [--limits FILE] \
[--timeout-ms N] [--compute-ms N] [--memory-mb N] [--max-output-bytes N] [--record FILE] \
[--record-max-bytes N] [--events FILE] [--isolation thread|process] [--max-calls N] [--max-pending-calls N]\n       \
code-runtime bench [--language typescript|python|all] [--quick] [--json]\n       \
code-runtime describe --bindings FILE [--language typescript|python]\n       \
code-runtime mcp --config FILE [--http ADDR] [--record FILE] [--record-max-bytes N]";

const HELP: &str = "code-runtime: run one LLM-written program in isolation against host bindings.

usage:
  code-runtime run PROGRAM [options]     run a program file (`-` reads stdin); prints one JSON result
  code-runtime bench [options]           measure the providers against their baselines
  code-runtime describe --bindings FILE [--language typescript|python]
                                         print the TypeScript declarations (default) or Python
                                         stubs the model should read about the bindings
  code-runtime mcp --config FILE [--http ADDR] [--record FILE] [--record-max-bytes N]
                                         serve code mode over MCP (stdio, or streamable HTTP
                                         at http://ADDR/mcp): run_code over the config's
                                         upstream MCP servers {\"servers\": {\"ns\": {\"command\":
                                         [..], \"env\": {..}} | {\"url\": \"..\"}}, \"bindings\",
                                         \"languages\", \"limits\"}

run options:
  --language typescript|python   default: from the extension (.ts .js .mts: typescript, .py: python)
  --bindings FILE                JSON {\"namespaces\": [{\"global\": \"tools\", \"errorClass\": {\"name\": \"ToolCallError\",
                                 \"memberNameProperty\": \"toolName\"}, \"functions\": {\"search\": {\"echo\": true}}}]}
                                 behaviours: {\"echo\": true} {\"reply\": JSON} {\"reject\": \"message\"}
                                 {\"command\": [\"prog\", \"arg\"]} (args JSON on stdin, stdout JSON resolves),
                                 each with an optional \"delayMs\": N; a function may add \"description\",
                                 \"input\" and \"output\" (JSON Schemas), a namespace \"description\"
  --limits FILE                  JSON {\"timeoutMs\", \"computeMs\", \"memoryMb\", \"maxOutputBytes\", \"maxCalls\",
                                 \"maxCallsPerFunction\", \"maxPendingCalls\"}; flags override
  --timeout-ms N                 wall-clock ceiling (default 600000)
  --compute-ms N                 CPU budget (default 60000)
  --memory-mb N                  memory budget (default 512); what the program makes the host hold
                                 (values, calls, output) is held to it as well
  --max-output-bytes N           output budget over logs plus value or message (default 67108864)
  --record FILE                  one JSON line per binding call
                                 {\"namespace\", \"function\", \"args\", \"ok\" | \"error\", \"startedMs\", \"durationMs\"},
                                 written as calls settle, nothing kept
  --record-max-bytes N           the record file's bound (default 1073741824): a call whose line
                                 would pass it ends the run as output-limit
  --events FILE                  one JSON line per event while the program runs (`-`: stderr): log, call,
                                 settled, end
  --max-calls N                  binding calls a run may make (default 10000); more reject
  --max-pending-calls N          binding calls in flight at once (default 1000); more reject
  --isolation thread|process     TypeScript: process (default) runs the isolate in a sandbox cell,
                                 thread in this process (trusted programs only); Python always
                                 runs in a cell

bench options:
  --language typescript|python|all   default all
  --quick                            a smaller sample, under a minute in all
  --json                             one JSON object instead of a table

example:
  code-runtime run examples/research.ts --bindings examples/research.bindings.json

exit codes: 0 completed, 1 the run failed (see the result's error), 2 misuse (one line on stderr,
nothing on stdout), 3 internal failure (one line on stderr: no usable interpreter, a record file
that could not be written; stdout has the result when the run took place)";

fn main() -> ExitCode {
    // The TypeScript provider starts this executable in each sandbox cell; there it serves the
    // cell's one run and exits, before anything else happens.
    code_runtime_worker_thread::serve_cell_if_asked();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("run") => run::main(&args[1..]),
        Some("bench") => bench::main(&args[1..]),
        Some("describe") => describe::main(&args[1..]),
        Some("mcp") => mcp::main(&args[1..]),
        Some("--help" | "-h" | "help") => {
            print_stdout(HELP);
            Ok(ExitCode::SUCCESS)
        }
        Some("--version" | "-V") => {
            print_stdout(concat!("code-runtime ", env!("CARGO_PKG_VERSION")));
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => Err(Failure::Misuse(format!(
            "unknown command {} ({USAGE})",
            code_runtime::json::quote(other)
        ))),
        None => Err(Failure::Misuse(format!("missing command ({USAGE})"))),
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

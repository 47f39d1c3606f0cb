//! The `code-runtime` command tested from outside, as docs/cli.md states its contract.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod approval;
mod deploy;
mod hostile;
mod mcp;
mod session;

fn binary() -> Command {
    #[expect(clippy::disallowed_methods, reason = "the binary under test")]
    let mut command = Command::new(env!("CARGO_BIN_EXE_code-runtime"));
    command.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    command
}

fn run(args: &[&str]) -> Output {
    binary().args(args).output().expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir()
            .join(format!("code-runtime-cli-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    /// `b.json`: bindings of one namespace, `tools`, whose `echo` resolves its argument.
    fn echo_bindings(&self) -> String {
        self.write(
            "b.json",
            r#"{"namespaces":[{"global":"tools","functions":{"echo":{"echo":true}}}]}"#,
        )
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[track_caller]
fn check_misuse(output: &Output, phrase: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", stderr(output));
    assert!(output.stdout.is_empty(), "stdout must stay empty: {}", stdout(output));
    let message = stderr(output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.starts_with("code-runtime: ") && message.contains(phrase), "{message}");
}

#[test]
fn the_typescript_example_runs() {
    let output =
        run(&["run", "examples/research.ts", "--bindings", "examples/research.bindings.json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(text.lines().count(), 1);
    assert!(text.contains(r#""missing":"fetch_page: 404 not found""#), "{text}");
}

#[test]
fn the_python_example_runs() {
    let output =
        run(&["run", "examples/aggregate.py", "--bindings", "examples/aggregate.bindings.json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).ends_with("\"value\":{\"totals\":{\"north\":200,\"south\":200,\"east\":200},\"grand_total\":600}}\n"), "{}", stdout(&output));
}

#[test]
fn a_failed_run_exits_1_with_the_result() {
    let scratch = Scratch::new("fail");
    let program = scratch.write("boom.ts", "console.log('before'); throw 'boom'");
    let output = run(&["run", &program]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stdout(&output),
        "{\"logs\":[\"before\"],\"error\":{\"kind\":\"exception\",\"message\":\"boom\"}}\n"
    );
}

#[test]
fn programs_from_stdin_with_a_language() {
    let mut child = binary()
        .args(["run", "-", "--language", "python"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"print('hi')\nreturn 6 * 7").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(stdout(&output), "{\"logs\":[\"hi\"],\"value\":42}\n");
}

#[test]
fn misuse_exits_2_with_one_line() {
    check_misuse(&run(&["run", "program.rb"]), "cannot tell the language");
    check_misuse(&run(&["run"]), "missing PROGRAM");
    check_misuse(
        &run(&["run", "examples/research.ts", "--language", "cobol"]),
        "--language must be",
    );
    check_misuse(&run(&["run", "examples/research.ts", "--bogus"]), "unknown option --bogus");
    check_misuse(
        &run(&["run", "examples/research.ts", "--timeout-ms", "soon"]),
        "must be a non-negative integer",
    );
    check_misuse(
        &run(&["run", "examples/research.ts", "--compute-ms", "0"]),
        "config.compute_ms must be a positive number",
    );
    check_misuse(&run(&["run", "/nonexistent/program.ts"]), "cannot read /nonexistent/program.ts");
    check_misuse(&run(&["frobnicate"]), "unknown command");
    check_misuse(&run(&[]), "missing command");
}

#[test]
fn invalid_bindings_are_misuse() {
    let scratch = Scratch::new("bindings");
    let reserved =
        scratch.write("reserved.json", r#"{"namespaces":[{"global":"lambda","functions":{}}]}"#);
    check_misuse(
        &run(&["run", "examples/research.ts", "--bindings", &reserved]),
        "binding global \"lambda\" is not a usable identifier",
    );
    let shape = scratch.write(
        "shape.json",
        r#"{"namespaces":[{"global":"tools","functions":{"x":{"teleport":true}}}]}"#,
    );
    check_misuse(
        &run(&["run", "examples/research.ts", "--bindings", &shape]),
        "expected exactly one of echo (true), reply, reject, command",
    );
    let junk = scratch.write("junk.json", "{not json");
    check_misuse(
        &run(&["run", "examples/research.ts", "--bindings", &junk]),
        "junk.json: invalid JSON at byte 1",
    );
}

#[test]
fn limits_file_and_flags() {
    let scratch = Scratch::new("limits");
    let program = scratch.write("big.ts", "return 'y'.repeat(10_000)");
    let limits = scratch.write("limits.json", r#"{"maxOutputBytes": 64}"#);
    let output = run(&["run", &program, "--limits", &limits]);
    assert_eq!(
        stdout(&output),
        "{\"logs\":[],\"error\":{\"kind\":\"output-limit\",\"message\":\"outer output exceeded 64 bytes\"}}\n"
    );
    // The flag overrides the file.
    let output = run(&["run", &program, "--limits", &limits, "--max-output-bytes", "20000"]);
    assert_eq!(output.status.code(), Some(0));
    let unknown = scratch.write("unknown.json", r#"{"heapMb": 1}"#);
    check_misuse(&run(&["run", &program, "--limits", &unknown]), "unknown limit \"heapMb\"");
    let spin = scratch.write("spin.py", "while True:\n    pass");
    let output = run(&["run", &spin, "--timeout-ms", "300"]);
    assert_eq!(
        stdout(&output),
        "{\"logs\":[],\"error\":{\"kind\":\"timeout\",\"message\":\"wall-clock ceiling reached (300ms)\"}}\n"
    );
}

#[test]
fn record_and_command_bindings() {
    let scratch = Scratch::new("record");
    let bindings = scratch.write(
        "bindings.json",
        r#"{"namespaces":[{"global":"tools","errorClass":{"name":"ToolCallError","memberNameProperty":"toolName"},"functions":{
            "shout":{"command":["python3","-c","import json,sys; print(json.dumps({'loud': json.load(sys.stdin)['text'].upper()}))"]},
            "broken":{"command":["python3","-c","import sys; sys.stderr.write('no such thing'); sys.exit(3)"]},
            "echo":{"echo":true,"delayMs":5}}}]}"#,
    );
    let program = scratch.write(
        "calls.ts",
        "const a = await tools.shout({ text: 'hi' });\nlet b = '';\ntry { await tools.broken({}) } catch (e) { b = e.message }\nreturn [a, b, await tools.echo([1])];",
    );
    let record = scratch.0.join("calls.jsonl");
    let output =
        run(&["run", &program, "--bindings", &bindings, "--record", record.to_str().unwrap()]);
    assert_eq!(
        stdout(&output),
        "{\"logs\":[],\"value\":[{\"loud\":\"HI\"},\"no such thing\",[1]]}\n",
        "{}",
        stderr(&output)
    );
    let lines = std::fs::read_to_string(&record).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with(r#"{"namespace":"tools","function":"shout","args":{"text":"hi"},"ok":{"loud":"HI"},"startedMs":"#), "{}", lines[0]);
    assert!(lines[1].contains(r#""error":"no such thing""#), "{}", lines[1]);
    assert!(lines.iter().all(|line| line.contains("\"durationMs\":")));
}

#[test]
fn events_stream_while_the_program_runs_and_a_killed_run_ends_them() {
    let scratch = Scratch::new("events");
    let bindings = scratch.write(
        "bindings.json",
        r#"{"namespaces":[{"global":"tools","functions":{"echo":{"echo":true},"wait":{"echo":true,"delayMs":60000}}}]}"#,
    );
    for (name, program) in [
        (
            "events.ts",
            "console.log('started');\nawait tools.echo({ n: 1 });\nawait tools.wait({});",
        ),
        ("events.py", "print('started')\nawait tools.echo({'n': 1})\nawait tools.wait({})"),
    ] {
        let program = scratch.write(name, program);
        let events = scratch.0.join(format!("{name}.jsonl"));
        let child = binary()
            .args(["run", &program, "--bindings", &bindings, "--events"])
            .arg(&events)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The call to `wait` is in the file while the program waits for it.
        let waiting = r#"{"event":"call","id":2,"namespace":"tools","function":"wait","args":{}}"#;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&events).unwrap_or_default().contains(waiting) {
            assert!(std::time::Instant::now() < deadline, "{name}: no call event while running");
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: kill has no memory effects; the child is ours and unreaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{name}: {}", stderr(&output));
        let text = std::fs::read_to_string(&events).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // The call still in flight is cancelled: it never settles; the stream ends.
        assert_eq!(lines.len(), 5, "{name}: {text}");
        assert_eq!(lines[0], r#"{"event":"log","line":"started"}"#, "{name}");
        assert_eq!(
            lines[1],
            r#"{"event":"call","id":1,"namespace":"tools","function":"echo","args":{"n":1}}"#,
            "{name}"
        );
        assert!(lines[2].starts_with(r#"{"event":"settled","id":1,"ok":true,"durationMs":"#));
        assert_eq!(lines[3], waiting, "{name}");
        assert_eq!(lines[4], r#"{"event":"end","kind":"abort"}"#, "{name}: {text}");
    }
}

#[test]
fn call_budgets_reject_calls_over_them() {
    let scratch = Scratch::new("budgets");
    let bindings = scratch.write(
        "bindings.json",
        r#"{"namespaces":[{"global":"tools","functions":{"echo":{"echo":true},"slow":{"echo":true,"delayMs":50}}}]}"#,
    );
    let program = scratch.write(
        "calls.ts",
        "const seen = [];\nfor (let i = 0; i < 3; i++) {\n  try { seen.push(await tools.echo(i)); } catch (e) { seen.push(e.data.budget); }\n}\nreturn seen;",
    );
    let output = run(&["run", &program, "--bindings", &bindings, "--max-calls", "2"]);
    assert_eq!(
        stdout(&output),
        "{\"logs\":[],\"value\":[0,1,\"maxCalls\"]}\n",
        "{}",
        stderr(&output)
    );
    let program = scratch.write(
        "pending.py",
        "import asyncio\nout = await asyncio.gather(*[tools.slow(i) for i in range(3)], return_exceptions=True)\nreturn [o if isinstance(o, int) else o.data['budget'] for o in out]",
    );
    // Calls past the pending budget wait their turn: none is refused.
    let output = run(&["run", &program, "--bindings", &bindings, "--max-pending-calls", "2"]);
    assert_eq!(stdout(&output), "{\"logs\":[],\"value\":[0,1,2]}\n", "{}", stderr(&output));
    let limits = scratch.write("limits.json", r#"{"maxCallsPerFunction": 1}"#);
    let program = scratch.write(
        "twice.ts",
        "await tools.echo(1);\ntry { await tools.echo(2) } catch (e) { return e.message }",
    );
    let output = run(&["run", &program, "--bindings", &bindings, "--limits", &limits]);
    assert_eq!(
        stdout(&output),
        "{\"logs\":[],\"value\":\"binding \\\"tools.echo\\\" was not called: this run may call it at most once\"}\n"
    );
    // Every budget has its flag (they come from the budgets' one declaration), and a flag
    // overrides the limits file.
    let output = run(&["run", &program, "--bindings", &bindings, "--max-calls-per-function", "1"]);
    assert_eq!(
        stdout(&output),
        "{\"logs\":[],\"value\":\"binding \\\"tools.echo\\\" was not called: this run may call it at most once\"}\n"
    );
    let output = run(&[
        "run",
        &program,
        "--bindings",
        &bindings,
        "--limits",
        &limits,
        "--max-calls-per-function",
        "2",
    ]);
    assert_eq!(stdout(&output), "{\"logs\":[]}\n", "{}", stderr(&output));
    check_misuse(
        &run(&["run", &program, "--max-calls", "0"]),
        "max_calls must be a positive number",
    );
    check_misuse(
        &run(&["run", &program, "--events", "/nonexistent/dir/events.jsonl"]),
        "cannot write /nonexistent/dir/events.jsonl",
    );
}

#[test]
fn describe_prints_declarations_or_stubs() {
    let output = run(&["describe", "--bindings", "examples/research.bindings.json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let declarations = stdout(&output);
    assert!(declarations.contains("declare class ToolCallError extends Error {"), "{declarations}");
    assert!(
        declarations.contains("  function search(args: {\n    /** The query. */\n    q: string;"),
        "{declarations}"
    );
    assert!(
        declarations.contains("}): Promise<{ hits: { title: string; score: number }[] }>;"),
        "{declarations}"
    );
    let output =
        run(&["describe", "--bindings", "examples/research.bindings.json", "--language", "python"]);
    let stubs = stdout(&output);
    assert!(
        stubs.contains("    async def search(self, args: SearchArgs, /) -> SearchResult:"),
        "{stubs}"
    );
    assert!(stubs.contains("class ToolCallError(Exception):"), "{stubs}");
    check_misuse(&run(&["describe"]), "describe needs --bindings FILE");
    check_misuse(
        &run(&["describe", "--bindings", "examples/research.bindings.json", "--language", "ruby"]),
        "--language must be typescript or python",
    );
    let scratch = Scratch::new("describe");
    let bad = scratch.write(
        "bad.json",
        r#"{"namespaces":[{"global":"tools","functions":{"f":{"echo":true,"input":3}}}]}"#,
    );
    check_misuse(&run(&["describe", "--bindings", &bad]), "input must be a JSON Schema");
}

#[test]
fn isolation_chooses_where_the_isolate_runs() {
    let scratch = Scratch::new("isolation");
    let program = scratch.write("one.ts", "console.log('one'); return 1");
    // The default, `process`, and `thread` give the same result; the cell is this executable.
    for args in [&[][..], &["--isolation", "process"], &["--isolation", "thread"]] {
        let output = binary().arg("run").arg(&program).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
        assert_eq!(stdout(&output), "{\"logs\":[\"one\"],\"value\":1}\n", "{args:?}");
    }
    // A V8 fatal error ends the cell, never the command.
    let fatal = scratch.write("fatal.ts", "'x'.repeat(2 ** 28).split('')");
    let output = run(&["run", &fatal]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with(
            "{\"logs\":[],\"error\":{\"kind\":\"worker-exit\",\"message\":\"worker error: V8 fatal error: "
        ),
        "{}",
        stdout(&output)
    );
    check_misuse(
        &run(&["run", &program, "--isolation", "vm"]),
        "--isolation must be thread or process",
    );
    let python = scratch.write("one.py", "return 1");
    check_misuse(&run(&["run", &python, "--isolation", "thread"]), "TypeScript only");
    assert_eq!(
        stdout(&run(&["run", &python, "--isolation", "process"])),
        "{\"logs\":[],\"value\":1}\n"
    );
}

#[test]
fn sigint_aborts_the_run() {
    let scratch = Scratch::new("sigint");
    for (name, program) in [("spin.ts", "for (;;) {}"), ("spin.py", "while True:\n    pass")] {
        let path = scratch.write(name, program);
        let child = binary()
            .args(["run", &path])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        // SAFETY: kill has no memory effects; the child is ours and unreaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{name}: {}", stderr(&output));
        assert_eq!(
            stdout(&output),
            "{\"logs\":[],\"error\":{\"kind\":\"abort\",\"message\":\"cancelled\"}}\n",
            "{name}"
        );
    }
}

#[test]
fn help_lists_the_commands_and_no_more() {
    for args in [&["--help"][..], &["-h"], &["help"]] {
        let output = run(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
        let help = stdout(&output);
        for command in ["run", "resume", "bench", "describe", "mcp", "completions", "run --help"] {
            assert!(help.contains(command), "{args:?} lacks {command}: {help}");
        }
        // The options are each command's: its own help shows them.
        for flag in ["--bindings", "--timeout-ms", "--allow", "--quick", "--config"] {
            assert!(!help.contains(flag), "{args:?} shows {flag}: {help}");
        }
        assert!(help.lines().count() < 30, "{args:?}: {help}");
    }
}

#[test]
fn every_subcommand_has_its_help() {
    for (args, flags) in [
        (&["run", "--help"][..], &["--bindings", "--limits", "--isolation", "--events"][..]),
        (&["run", "-h"], &["--max-pending-calls", "--record-max-bytes"]),
        (&["help", "run"], &["--timeout-ms"]),
        (&["resume", "--help"], &["--allow", "--deny", "--bindings", "--approvals"]),
        (&["bench", "--help"], &["--quick", "--json", "--language"]),
        (&["describe", "--help"], &["--bindings", "--language"]),
        (&["mcp", "--help"], &["--config", "--http", "--record"]),
        (&["completions", "--help"], &["bash", "zsh", "fish"]),
    ] {
        let output = run(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
        let help = stdout(&output);
        assert!(help.contains("Usage: code-runtime "), "{args:?}: {help}");
        for flag in flags {
            assert!(help.contains(flag), "{args:?} lacks {flag}: {help}");
        }
    }
    let output = run(&["--version"]);
    assert_eq!(stdout(&output), format!("code-runtime {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn mistyped_options_and_commands_are_misuse_with_a_suggestion() {
    check_misuse(
        &run(&["run", "examples/research.ts", "--bindngs", "x.json"]),
        "unknown option --bindngs (did you mean --bindings?)",
    );
    check_misuse(&run(&["descibe"]), "unknown command \"descibe\" (did you mean describe?)");
    check_misuse(&run(&["run", "examples/research.ts", "--language"]), "--language needs a value");
    check_misuse(
        &run(&["run", "examples/research.ts", "--max-calls", "-5"]),
        "--max-calls must be a non-negative integer, got -5",
    );
    check_misuse(&run(&["run", "a.ts", "b.ts"]), "unexpected argument b.ts");
    check_misuse(
        &run(&["run", "a.ts", "--isolation", "vm"]),
        "--isolation must be thread or process, got vm",
    );
    check_misuse(
        &run(&["bench", "--language", "go"]),
        "--language must be typescript, python or all, got go",
    );
    check_misuse(&run(&["completions", "tcsh"]), "SHELL must be bash, elvish, fish");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _code__runtime"),
        ("zsh", "#compdef code-runtime"),
        ("fish", "complete -c code-runtime"),
    ] {
        let output = run(&["completions", shell]);
        assert_eq!(output.status.code(), Some(0), "{shell}: {}", stderr(&output));
        let script = stdout(&output);
        assert!(script.contains(marker), "{shell}: {script}");
        // The subcommands and their options are in it.
        assert!(script.contains("describe") && script.contains("bindings"), "{shell}");
    }
}

#[test]
fn files_are_read_bounded_and_strictly() {
    let scratch = Scratch::new("strict");
    let twice = scratch.write("twice.json", r#"{"timeoutMs": 5, "timeoutMs": 6}"#);
    check_misuse(&run(&["run", "examples/research.ts", "--limits", &twice]), "appears twice");
    check_misuse(
        &run(&["run", "examples/research.ts", "--bindings", "/dev/zero"]),
        "/dev/zero is not a regular file",
    );
    check_misuse(&run(&["run", "/dev/zero", "--language", "python"]), "not a regular file");
    check_misuse(
        &run(&["run", "examples/research.ts", "--record", "/nonexistent/dir/calls.jsonl"]),
        "cannot write /nonexistent/dir/calls.jsonl",
    );
}

#[test]
fn an_internal_failure_exits_3_with_one_line() {
    // The record file opens (it is a device) but every write to it fails.
    let output = run(&[
        "run",
        "examples/research.ts",
        "--bindings",
        "examples/research.bindings.json",
        "--record",
        "/dev/full",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.starts_with("code-runtime: cannot write /dev/full"), "{message}");
    assert!(stdout(&output).contains("\"value\""), "the result is not lost");
}

/// `--truncate`: a result over the output budget comes back shrunk, the same in both languages,
/// where without it the run fails as `output-limit`.
#[test]
fn truncate_shrinks_what_would_fail_the_same_way_in_both_languages() {
    let scratch = Scratch::new("truncate");
    let python = scratch.write(
        "big.py",
        "rows = [{'id': i, 'body': 'x' * 200} for i in range(5000)]\nfor i in range(300):\n    print('progress', i)\nreturn {'count': len(rows), 'rows': rows}",
    );
    let typescript = scratch.write(
        "big.ts",
        "const rows = Array.from({ length: 5000 }, (_, i) => ({ id: i, body: 'x'.repeat(200) }));\nfor (let i = 0; i < 300; i++) console.log('progress', i);\nreturn { count: rows.length, rows };",
    );
    let mut seen = Vec::new();
    for program in [&python, &typescript] {
        let failed = run(&["run", program, "--max-output-bytes", "20000"]);
        assert_eq!(failed.status.code(), Some(1));
        assert!(stdout(&failed).contains(r#""kind":"output-limit""#), "{}", stdout(&failed));
        for (budget, args) in [
            (20_000, vec!["--truncate", "--max-output-bytes", "20000"]),
            (4_000, vec!["--max-result-tokens", "1000"]),
        ] {
            let output = binary().args(["run", program]).args(&args).output().unwrap();
            assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
            let result = code_runtime::json::parse(stdout(&output).trim()).unwrap();
            let truncated = &result["truncated"];
            let to = truncated["toBytes"].as_u64().unwrap() as usize;
            assert!(to <= budget && to > budget / 2, "{truncated}");
            assert!(truncated["fromBytes"].as_u64().unwrap() > 1_000_000, "{truncated}");
            assert_eq!(result["value"]["count"], code_runtime::json!(5000));
            let rows = result["value"]["rows"].as_array().unwrap();
            assert!(rows.last().unwrap().as_str().unwrap().ends_with(" more items"));
            assert_eq!(result["logs"][0], code_runtime::json!("progress 0"));
            seen.push(stdout(&output));
        }
    }
    // The same contract: the same result, byte for byte, from either language.
    assert_eq!(seen[0], seen[2]);
    assert_eq!(seen[1], seen[3]);
    // Within budget: nothing cut, nothing said.
    let small = scratch.write("small.py", "print('hi')\nreturn [1, 2, 3]");
    let output = run(&["run", &small, "--truncate"]);
    assert_eq!(stdout(&output).trim(), r#"{"logs":["hi"],"value":[1,2,3]}"#);
}

/// The virtual environment of `python-packages/` (numpy and pandas), which `cargo xtask test`
/// installs from its lockfile.
fn venv_python() -> String {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../python-packages/.venv/bin/python");
    assert!(python.exists(), "{} is missing: run `cargo xtask test`", python.display());
    python.to_string_lossy().into_owned()
}

#[test]
fn python_programs_use_a_virtual_environments_packages_preloaded_or_not() {
    let scratch = Scratch::new("packages");
    let program = scratch.write(
        "sum.py",
        "import sys\nloaded = 'pandas' in sys.modules\nimport pandas as pd\n\
         return [loaded, int(pd.DataFrame({'a': range(1000)})['a'].sum())]",
    );
    let python = venv_python();
    let output = run(&["run", &program, "--python", &python]);
    assert_eq!(stdout(&output), "{\"logs\":[],\"value\":[false,499500]}\n", "{output:?}");
    let output = run(&["run", &program, "--python", &python, "--preload", "numpy,pandas"]);
    assert_eq!(stdout(&output), "{\"logs\":[],\"value\":[true,499500]}\n", "{output:?}");
    // What the user named and cannot serve is misuse, as is naming it for TypeScript.
    check_misuse(
        &run(&["run", &program, "--python", &python, "--preload", "no_such_module_here"]),
        "no_such_module_here",
    );
    check_misuse(&run(&["run", &program, "--preload", "os;rm"]), "preload");
    check_misuse(&run(&["run", &program, "--python", "/nonexistent/python3"]), "/nonexistent");
    check_misuse(
        &run(&["run", "examples/research.ts", "--preload", "numpy"]),
        "an interpreter or preloaded modules are for Python runs",
    );
    // What the model reads: the stubs, then the environment's packages.
    let bindings = "examples/research.bindings.json";
    let described =
        run(&["describe", "--bindings", bindings, "--language", "python", "--python", &python]);
    let text = stdout(&described);
    let last = text.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("# Python programs can import these packages: ")
            && last.contains("numpy 2.2.6")
            && last.contains("pandas 2.3.3"),
        "{text}"
    );
    check_misuse(
        &run(&["describe", "--bindings", bindings, "--python", &python]),
        "--python is for --language python",
    );
}

//! Approvals through the command line (docs/cli.md "Turn 3"): `--approvals`, exit code 4 and the
//! paused JSON, `resume`, the checkpoint key, the terminal's questions, and the audit lines.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Output;

use crate::{Scratch, binary, check_misuse, stderr, stdout};

const BINDINGS: &str = r#"{"namespaces": [{"global": "gh",
  "errorClass": {"name": "GhError", "memberNameProperty": "tool"},
  "functions": {
    "list": {"reply": ["infra", "web"]},
    "delete_repo": {"echo": true, "approval": true},
    "write": {"echo": true, "approval": {"when": {"properties": {"force": {"const": true}}, "required": ["force"]}}}
  }}]}"#;

const TYPESCRIPT: &str = r#"
const repos = await gh.list();
console.log("before", Math.random(), Date.now(), crypto.randomUUID());
await gh.write({ force: false });
const out = [];
for (const name of repos) {
  try { out.push(await gh.delete_repo({ name })); } catch (e) { out.push(`${e.name} ${e.message}`); }
}
return out;
"#;

const PYTHON: &str = r#"
import random, time, uuid
repos = await gh.list()
print("before", random.random(), time.time(), uuid.uuid4())
await gh.write({"force": False})
out = []
for name in repos:
    try:
        out.append(await gh.delete_repo({"name": name}))
    except GhError as e:
        out.append(f"GhError {e}")
return out
"#;

/// The command, with the scratch directory as the user's cache (where a key is kept).
fn command(scratch: &Scratch, args: &[&str]) -> Output {
    binary()
        .args(args)
        .env("XDG_CACHE_HOME", scratch.0.join("cache"))
        .env_remove("CODE_RUNTIME_CHECKPOINT_KEY")
        .output()
        .expect("the binary runs")
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(output)).unwrap_or_else(|_| panic!("{}", stdout(output)))
}

#[test]
fn marked_calls_are_denied_by_default_and_allowed_with_allow_and_the_record_names_who() {
    let scratch = Scratch::new("approvals-policy");
    let bindings = scratch.write("b.json", BINDINGS);
    let program = scratch.write("p.ts", TYPESCRIPT);
    let record = scratch.0.join("record.jsonl");
    let output = command(
        &scratch,
        &["run", &program, "--bindings", &bindings, "--record", record.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let denied = "GhError denied: denied on the command line (--approvals deny)";
    assert_eq!(json(&output)["value"], serde_json::json!([denied, denied]));
    let lines = std::fs::read_to_string(&record).unwrap();
    let deny_lines: Vec<_> = lines
        .lines()
        .filter(|line| line.contains(r#""approval":{"decision":"deny","by":"policy"}"#))
        .collect();
    assert_eq!(deny_lines.len(), 2, "{lines}");
    assert!(deny_lines[0].contains(r#""error":"denied: denied on the command line"#), "{lines}");

    let events = scratch.0.join("events.jsonl");
    let output = command(
        &scratch,
        &[
            "run",
            &program,
            "--bindings",
            &bindings,
            "--approvals",
            "allow",
            "--record",
            record.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json(&output)["value"], serde_json::json!([{ "name": "infra" }, { "name": "web" }]));
    let lines = std::fs::read_to_string(&record).unwrap();
    assert_eq!(lines.matches(r#""approval":{"decision":"allow","by":"policy"}"#).count(), 2);
    assert!(lines.contains(r#""function":"write","args":{"force":false},"ok""#), "not asked");
    let events = std::fs::read_to_string(&events).unwrap();
    assert!(events.contains(r#"{"event":"approval","id":3,"call":3,"namespace":"gh","function":"delete_repo","args":{"name":"infra"}}"#), "{events}");
    assert!(
        events.contains(r#"{"event":"decided","id":3,"decision":"allow","by":"policy"}"#),
        "{events}"
    );
}

fn pause_and_resume(language: &str, program: &str) {
    let scratch = Scratch::new(&format!("approvals-pause-{language}"));
    let bindings = scratch.write("b.json", BINDINGS);
    let program = scratch.write(program, if language == "ts" { TYPESCRIPT } else { PYTHON });
    let checkpoint = scratch.0.join("paused.json");
    let checkpoint = checkpoint.to_str().unwrap();
    let output = command(
        &scratch,
        &[
            "run",
            &program,
            "--bindings",
            &bindings,
            "--approvals",
            "pause",
            "--checkpoint",
            checkpoint,
        ],
    );
    assert_eq!(output.status.code(), Some(4), "{language}: {}", stderr(&output));
    let paused = json(&output);
    assert_eq!(paused["paused"]["checkpoint"], checkpoint);
    assert_eq!(
        paused["paused"]["pending"],
        serde_json::json!([{ "id": 3, "namespace": "gh", "function": "delete_repo", "args": { "name": "infra" } }])
    );
    assert!(paused.get("value").is_none() && paused.get("error").is_none());
    let mode = std::fs::metadata(checkpoint).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{language}: the checkpoint is the user's only");
    let key = scratch.0.join("cache/code-runtime/checkpoint.key");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o077, 0);
    let original = std::fs::read_to_string(checkpoint).unwrap();

    // Refused resumes leave the checkpoint as it was.
    let edited = scratch.write("edited.json", &original.replacen("infra", "INFRA", 1));
    check_misuse(
        &command(&scratch, &["resume", &edited, "--bindings", &bindings, "--allow", "3"]),
        "signature does not verify",
    );
    let other = scratch.write("other.json", r#"{"namespaces": []}"#);
    check_misuse(
        &command(&scratch, &["resume", checkpoint, "--bindings", &other, "--allow", "3"]),
        "other bindings",
    );
    check_misuse(
        &command(&scratch, &["resume", checkpoint, "--bindings", &bindings, "--allow", "9"]),
        "decision for call 9",
    );
    let foreign = binary()
        .args(["resume", checkpoint, "--bindings", &bindings, "--allow", "3"])
        .env("CODE_RUNTIME_CHECKPOINT_KEY", "00112233445566778899aabbccddeeff")
        .output()
        .unwrap();
    check_misuse(&foreign, "signature does not verify");
    assert_eq!(std::fs::read_to_string(checkpoint).unwrap(), original, "{language}");

    // Allowed, the run pauses again at the next call; its checkpoint replaces the first.
    let first = scratch.write("first.json", &original);
    let output = command(
        &scratch,
        &["resume", checkpoint, "--bindings", &bindings, "--allow", "3", "--approvals", "pause"],
    );
    assert_eq!(output.status.code(), Some(4), "{language}: {}", stderr(&output));
    // The first checkpoint's decisions were used: resuming it again (a copy kept aside) is
    // refused, whatever the decisions, and nothing runs.
    for decisions in [["--allow", "3"], ["--deny", "3"]] {
        let replay = command(
            &scratch,
            &[&["resume", first.as_str(), "--bindings", &bindings][..], &decisions[..]].concat(),
        );
        check_misuse(&replay, "the checkpoint was resumed already");
    }
    let again = json(&output);
    assert_eq!(again["logs"], paused["logs"], "{language}: the same numbers, dates and uuids");
    assert_eq!(again["paused"]["pending"][0]["id"], 4);
    let output = command(
        &scratch,
        &["resume", checkpoint, "--bindings", &bindings, "--deny", "4:not this one"],
    );
    assert_eq!(output.status.code(), Some(0), "{language}: {}", stderr(&output));
    let done = json(&output);
    assert_eq!(done["logs"], paused["logs"], "{language}");
    assert_eq!(
        done["value"],
        serde_json::json!([{ "name": "infra" }, "GhError denied: not this one"]),
        "{language}"
    );
}

#[test]
fn a_paused_typescript_run_exits_4_and_resumes_with_the_same_numbers() {
    pause_and_resume("ts", "p.ts");
}

#[test]
fn a_paused_python_run_exits_4_and_resumes_with_the_same_numbers() {
    pause_and_resume("py", "p.py");
}

#[test]
fn approval_misuse_is_one_line() {
    let scratch = Scratch::new("approvals-misuse");
    let bindings = scratch.write("b.json", BINDINGS);
    let program = scratch.write("p.ts", TYPESCRIPT);
    check_misuse(
        &command(&scratch, &["run", &program, "--bindings", &bindings, "--approvals", "pause"]),
        "--approvals pause needs --checkpoint FILE",
    );
    // The tests' stdin is not a terminal.
    check_misuse(
        &command(&scratch, &["run", &program, "--approvals", "ask"]),
        "--approvals ask needs a terminal",
    );
    check_misuse(
        &command(&scratch, &["run", &program, "--approvals", "sometimes"]),
        "--approvals must be ask, deny, allow or pause, got sometimes",
    );
    let weak = scratch.write("weak.key", "0011");
    private(&weak);
    let checkpoint = scratch.0.join("c.json");
    check_misuse(
        &command(
            &scratch,
            &[
                "run",
                &program,
                "--approvals",
                "pause",
                "--checkpoint",
                checkpoint.to_str().unwrap(),
                "--checkpoint-key",
                &weak,
            ],
        ),
        "at least 16 bytes",
    );
    // A key other users can read is refused whatever it holds.
    let shared = scratch.write("shared.key", "00112233445566778899aabbccddeeff\n");
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let pausing = ["run", &program, "--approvals", "pause", "--checkpoint"];
    let output = command(
        &scratch,
        &[&pausing[..], &[checkpoint.to_str().unwrap(), "--checkpoint-key", &shared]].concat(),
    );
    check_misuse(&output, "readable by every user");
    check_misuse(&command(&scratch, &["resume"]), "missing CHECKPOINT");
    let not = scratch.write("not.json", "{}");
    check_misuse(&command(&scratch, &["resume", &not]), "not a checkpoint");
    check_misuse(
        &command(&scratch, &["resume", &not, "--allow", "1", "--deny", "1"]),
        "not a checkpoint",
    );
    assert!(!checkpoint.exists(), "nothing is left of a run that never started");
}

/// Runs the command on a pseudo-terminal, answering each question with the next of `answers`
/// (python3's `pty`, which the tests have anyway).
fn on_a_terminal(scratch: &Scratch, args: &[&str], answers: &[&str]) -> String {
    const DRIVER: &str = r#"
import os, pty, sys
answers = sys.argv[1].split(",")
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
out = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
    if b"allow?" in chunk and answers:
        os.write(fd, (answers.pop(0) + "\n").encode())
os.waitpid(pid, 0)
sys.stdout.write(out.decode())
"#;
    #[expect(clippy::disallowed_methods, reason = "the test's terminal")]
    let output = std::process::Command::new("python3")
        .args(["-c", DRIVER, &answers.join(","), env!("CARGO_BIN_EXE_code-runtime")])
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env("XDG_CACHE_HOME", scratch.0.join("cache"))
        .output()
        .expect("python3 runs");
    stdout(&output)
}

#[test]
fn ask_puts_one_question_per_call_on_the_terminal() {
    let scratch = Scratch::new("approvals-ask");
    let bindings = scratch.write("b.json", BINDINGS);
    let program = scratch.write("p.ts", TYPESCRIPT);
    let run = ["run", program.as_str(), "--bindings", bindings.as_str(), "--approvals", "ask"];
    let transcript = on_a_terminal(&scratch, &run, &["y", "n"]);
    // Without --checkpoint the run cannot pause, and the question does not offer it.
    assert!(
        transcript.contains(
            r#"code-runtime: call 3 gh.delete_repo({"name":"infra"}): allow? [y]es, [n]o, [a]ll of this run: "#
        ),
        "{transcript}"
    );
    assert!(
        transcript
            .contains(r#""value":[{"name":"infra"},"GhError denied: declined on the terminal"]"#),
        "{transcript}"
    );
    // `a` allows this call and the rest of the run without asking again.
    let transcript = on_a_terminal(&scratch, &run, &["a"]);
    assert_eq!(transcript.matches("allow?").count(), 1, "{transcript}");
    assert!(transcript.contains(r#""value":[{"name":"infra"},{"name":"web"}]"#), "{transcript}");
    // `p` pauses, with a checkpoint file.
    let checkpoint = scratch.0.join("asked.json");
    let mut paused = run.to_vec();
    paused.extend(["--checkpoint", checkpoint.to_str().unwrap()]);
    let transcript = on_a_terminal(&scratch, &paused, &["p"]);
    assert!(transcript.contains("[a]ll of this run, [p]ause: "), "{transcript}");
    assert!(transcript.contains(r#""paused":{"checkpoint":"#), "{transcript}");
    assert!(checkpoint.exists());
}

/// Makes `path` readable by this user alone, as a key file must be.
pub(crate) fn private(path: &str) {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

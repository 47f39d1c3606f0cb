//! The command line's file formats and call record, and `command` bindings under abuse.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use code_runtime::json;
use code_runtime::{BindingArgs, CodeBindingNamespace, JsonValue, Limits};
use code_runtime_fixtures::{
    LimitsFile, Recorder, Rotation, bindings_from_json, read_document, read_text,
};

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir()
            .join(format!("code-runtime-fixtures-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn namespaces(
    document: JsonValue,
    recorder: &Recorder,
) -> Result<Vec<CodeBindingNamespace>, String> {
    bindings_from_json(&document, "test.json", recorder)
        .map(|file| file.namespaces)
        .map_err(|error| error.to_string())
}

fn call(
    namespace: &CodeBindingNamespace,
    name: &str,
    args: JsonValue,
) -> Result<JsonValue, (String, Option<JsonValue>)> {
    let function = namespace.functions[name].clone();
    tokio()
        .block_on(function.call(BindingArgs::new(args)))
        .map_err(|error| (error.message().to_owned(), error.data().cloned()))
}

#[test]
fn behaviours() {
    let document = json!({"namespaces": [{"global": "tools", "functions": {
        "echo": {"echo": true},
        "reply": {"reply": {"a": [1]}},
        "reject": {"reject": "denied", "data": {"status": 403}},
        "slow": {"echo": true, "delayMs": 30},
    }}]});
    let tools = namespaces(document, &Recorder::off()).unwrap().remove(0);
    assert_eq!(call(&tools, "echo", json!([1])), Ok(json!([1])));
    assert_eq!(call(&tools, "reply", json!(null)), Ok(json!({"a": [1]})));
    assert_eq!(
        call(&tools, "reject", json!(null)),
        Err(("denied".into(), Some(json!({"status": 403}))))
    );
    let start = Instant::now();
    assert_eq!(call(&tools, "slow", json!(2)), Ok(json!(2)));
    assert!(start.elapsed() >= Duration::from_millis(30));
}

#[test]
fn descriptions_and_schemas_reach_the_bindings() {
    let document = json!({"namespaces": [{"global": "tools", "description": "Tools.", "functions": {
        "search": {"echo": true, "description": "Search.", "input": {"type": "object"}, "output": true},
        "plain": {"reply": 1},
    }}]});
    let tools = namespaces(document, &Recorder::off()).unwrap().remove(0);
    assert_eq!(tools.description.as_deref(), Some("Tools."));
    let search = &tools.functions["search"];
    assert_eq!(search.description_text(), Some("Search."));
    assert_eq!(search.input_schema(), Some(&json!({"type": "object"})));
    assert_eq!(search.output_schema(), Some(&json!(true)));
    let plain = &tools.functions["plain"];
    assert_eq!(
        (plain.description_text(), plain.input_schema(), plain.output_schema()),
        (None, None, None)
    );
    assert_eq!(call(&tools, "search", json!([1])), Ok(json!([1])), "the behaviour is unchanged");
}

#[test]
fn validate_checks_a_function_or_every_function_of_a_namespace_that_has_an_input() {
    let input = json!({"type": "object", "required": ["q"]});
    let document = json!({"namespaces": [
        {"global": "one", "functions": {
            "checked": {"echo": true, "input": input, "validate": true},
            "described": {"echo": true, "input": input},
        }},
        {"global": "all", "validate": true, "functions": {
            "checked": {"echo": true, "input": input},
            "schemaless": {"echo": true},
            "opted_out": {"echo": true, "input": input, "validate": false},
        }},
    ]});
    let loaded = namespaces(document, &Recorder::off()).unwrap();
    let validates =
        |namespace: usize, name: &str| loaded[namespace].functions[name].validates_input();
    assert!(validates(0, "checked") && !validates(0, "described"));
    assert!(validates(1, "checked") && !validates(1, "schemaless"));
    assert!(!validates(1, "opted_out"), "a function's own validate wins over its namespace's");
}

#[test]
fn the_format_is_checked_key_by_key() {
    for (document, message) in [
        (json!([]), "test.json: expected {\"namespaces\": [...]}"),
        (json!({"namespaces": [], "extra": 1}), "test.json: unknown key \"extra\""),
        (
            json!({"namespaces": [{"global": "t", "functions": {}, "typo": 1}]}),
            "test.json: unknown namespace key \"typo\"",
        ),
        (
            json!({"namespaces": [{"functions": {}}]}),
            "test.json: a namespace needs a string \"global\"",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"teleport": true}}}]}),
            "test.json: function \"f\": expected exactly one of echo (true), reply, reject, command",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"echo": true, "reply": 1}}}]}),
            "test.json: function \"f\": expected exactly one of echo (true), reply, reject, command",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"echo": true, "data": 1}}}]}),
            "test.json: function \"f\": unknown key \"data\"",
        ),
        (
            json!({"namespaces": [{"global": "t", "description": 1, "functions": {}}]}),
            "test.json: a namespace's description must be a string",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"echo": true, "output": "string"}}}]}),
            "test.json: function \"f\": output must be a JSON Schema (an object or a boolean)",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"echo": true, "description": []}}}]}),
            "test.json: function \"f\": description must be a string",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"echo": true, "validate": true}}}]}),
            "test.json: function \"f\": validate needs an input schema",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"echo": true, "validate": 1}}}]}),
            "test.json: function \"f\": validate must be a boolean",
        ),
        (
            json!({"namespaces": [{"global": "t", "validate": "yes", "functions": {}}]}),
            "test.json: a namespace's validate must be a boolean",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"command": []}}}]}),
            "test.json: function \"f\": command must be a non-empty array of strings",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"command": ["x"], "timeoutMs": 0}}}]}),
            "test.json: function \"f\": timeoutMs must be a positive integer",
        ),
        (
            json!({"namespaces": [{"global": "t", "functions": {"f": {"echo": true, "delayMs": -1}}}]}),
            "test.json: function \"f\": delayMs must be a non-negative integer",
        ),
    ] {
        assert_eq!(namespaces(document, &Recorder::off()).unwrap_err(), message);
    }
}

#[test]
fn files_are_read_bounded_and_strict() {
    let scratch = Scratch::new("files");
    let twice = scratch.write("twice.json", r#"{"namespaces": [], "namespaces": []}"#);
    let error = read_document(&twice).unwrap_err().to_string();
    assert!(error.ends_with("key \"namespaces\" appears twice in one object (byte 35)"), "{error}");
    let error = read_text(std::path::Path::new("/dev/zero")).unwrap_err().to_string();
    assert_eq!(error, "/dev/zero is not a regular file");
    let fifo = scratch.0.join("fifo");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a path we own.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    assert_eq!(
        read_text(&fifo).unwrap_err().to_string().split(" is ").nth(1),
        Some("not a regular file")
    );
    let big = scratch.0.join("big");
    std::fs::File::create(&big).unwrap().set_len(17 << 20).unwrap();
    assert!(read_text(&big).unwrap_err().to_string().ends_with("is larger than 16 MiB"));
    let directory = read_text(&scratch.0).unwrap_err().to_string();
    assert!(
        directory.contains("not a regular file") || directory.contains("cannot read"),
        "{directory}"
    );
}

#[test]
fn limits_files() {
    let file = LimitsFile::from_json(&json!({"timeoutMs": 5, "memoryMb": 64}), "l.json").unwrap();
    let limits = file.apply(Limits::default());
    assert_eq!((limits.max_wall_ms, limits.max_memory_mb, limits.compute_ms), (5, 64, 60_000));
    assert_eq!(
        LimitsFile::from_json(&json!({"heapMb": 1}), "l.json").unwrap_err().to_string(),
        "l.json: unknown limit \"heapMb\" (computeMs, timeoutMs, maxOutputBytes, memoryMb, maxCalls, maxCallsPerFunction, maxPendingCalls, maxSessionBytes, sessionIdleMs, maxSessions)"
    );
    let calls = json!({"maxCalls": 50, "maxCallsPerFunction": 5, "maxPendingCalls": 8});
    let limits = LimitsFile::from_json(&calls, "l.json").unwrap().apply(Limits::default());
    assert_eq!(
        (limits.max_calls, limits.max_calls_per_function, limits.max_pending_calls),
        (50, 5, 8)
    );
    assert_eq!(
        LimitsFile::from_json(&json!({"timeoutMs": -1}), "l.json").unwrap_err().to_string(),
        "l.json: timeoutMs: invalid value: integer `-1`, expected a non-negative integer"
    );
}

#[test]
fn the_recorder_keeps_every_call_for_a_harness() {
    let recorder = Recorder::keeping();
    let document = json!({"namespaces": [{"global": "tools", "functions": {
        "echo": {"echo": true}, "reject": {"reject": "no", "data": {"why": 1}}}}]});
    let tools = namespaces(document, &recorder).unwrap().remove(0);
    let _ = call(&tools, "echo", json!({"q": "x"}));
    let _ = call(&tools, "reject", json!(null));
    let records = recorder.take_records();
    assert_eq!(records.len(), 2);
    assert_eq!((records[0].function.as_str(), &records[0].args), ("echo", &json!({"q": "x"})));
    assert_eq!(records[1].outcome, Err(("no".to_owned(), Some(json!({"why": 1})))));
    assert!(recorder.take_records().is_empty(), "taken");
}

#[test]
fn the_recorder_writes_every_call_keeps_none_and_stops_at_its_bound() {
    let scratch = Scratch::new("record");
    let path = scratch.0.join("calls.jsonl");
    let recorder = Recorder::file(&path, 300, Rotation::Stop).unwrap();
    let document = json!({"namespaces": [{"global": "tools", "functions": {
        "echo": {"echo": true}, "reject": {"reject": "no", "data": {"why": 1}}}}]});
    let tools = namespaces(document, &recorder).unwrap().remove(0);
    assert_eq!(call(&tools, "echo", json!({"q": "x"})), Ok(json!({"q": "x"})));
    let _ = call(&tools, "reject", json!(null));
    assert!(recorder.take_records().is_empty(), "a writing recorder keeps nothing");
    let written = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = written.lines().collect();
    assert!(
        lines[0].starts_with(
            r#"{"namespace":"tools","function":"echo","args":{"q":"x"},"ok":{"q":"x"},"startedMs":"#
        ),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with(r#"{"namespace":"tools","function":"reject","args":null,"error":"no","data":{"why":1},"startedMs":"#), "{}", lines[1]);
    assert_eq!(recorder.write_error(), None);
    // The next line does not fit the 300 bytes: it is not written, and the call's answer is the
    // one that ends the run as `output-limit`.
    let big = json!({"q": "y".repeat(200)});
    let full = call(&tools, "echo", big).unwrap_err();
    let named = format!(
        "the record file {:?} reached its bound of 300 bytes (--record-max-bytes): the run stops, as a call it made cannot be recorded",
        path.display().to_string()
    );
    assert_eq!(full.0, named);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), written, "nothing more written");
    assert_eq!(call(&tools, "echo", json!(1)).unwrap_err().0, named, "full stays full");
}

#[test]
fn a_rotating_record_moves_a_full_file_aside_and_goes_on() {
    use std::os::unix::fs::PermissionsExt as _;
    let scratch = Scratch::new("record-rotate");
    let path = scratch.0.join("calls.jsonl");
    let aside = scratch.0.join("calls.jsonl.1");
    let recorder = Recorder::file(&path, 300, Rotation::Rotate).unwrap();
    let document =
        json!({"namespaces": [{"global": "tools", "functions": {"echo": {"echo": true}}}]});
    let tools = namespaces(document, &recorder).unwrap().remove(0);
    // Each line is about 130 bytes: two fit, the third starts a fresh file, and so on.
    for n in 0..7 {
        let args = json!({ "n": n, "pad": "p".repeat(10) });
        assert_eq!(call(&tools, "echo", args.clone()), Ok(args), "call {n}");
    }
    let current = std::fs::read_to_string(&path).unwrap();
    let before = std::fs::read_to_string(&aside).unwrap();
    assert!(current.len() <= 300 && before.len() <= 300);
    assert!(current.contains(r#""n":6"#) && before.contains(r#""n":5"#), "{before}{current}");
    assert!(!current.contains(r#""n":0"#) && !before.contains(r#""n":0"#), "older files are gone");
    for file in [&path, &aside] {
        assert_eq!(std::fs::metadata(file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // A line longer than the bound on its own fails its own call, and the record goes on.
    let huge = call(&tools, "echo", json!("h".repeat(400))).unwrap_err();
    assert!(huge.0.contains("reached its bound of 300 bytes"), "{}", huge.0);
    assert_eq!(call(&tools, "echo", json!(7)), Ok(json!(7)));
    assert!(std::fs::read_to_string(&path).unwrap().contains(r#""args":7"#));
    assert_eq!(recorder.write_error(), None);
}

/// A program cannot erase what a shared record holds of other runs: a run that made the record
/// rotate once is refused a second rotation (its call ends its run as `output-limit`), so the
/// lines another run wrote before the first rotation stay in `<path>.1`. Another run may rotate
/// again, and a run's calls that fit go on.
#[test]
fn one_run_cannot_rotate_a_shared_record_twice() {
    let scratch = Scratch::new("record-rotate-twice");
    let path = scratch.0.join("calls.jsonl");
    let aside = scratch.0.join("calls.jsonl.1");
    let recorder = Recorder::file(&path, 300, Rotation::Rotate).unwrap();
    let line = |run: u64, n: usize| {
        // About 130 bytes a line: two fit.
        let args = json!({ "run": run, "n": n, "pad": "p".repeat(4) });
        recorder.start_in(Some(run), "tools", "echo", &args).unwrap().finish(&Ok(json!(null)))
    };
    // Another client's run is recorded first.
    assert_eq!(line(1, 0), Ok(()));
    // The program's run fills the file, rotates it once, fills the fresh one...
    let mut refused = None;
    for n in 0..10 {
        if let Err(full) = line(2, n) {
            refused = Some((n, full));
            break;
        }
    }
    let (n, full) = refused.expect("a second rotation is refused");
    assert!(full.to_string().contains("reached its bound of 300 bytes"), "{full}");
    assert_eq!(n, 3, "the first rotation was allowed, at line 1");
    // ...and the other run's line is still there, in the file set aside.
    let before = std::fs::read_to_string(&aside).unwrap();
    assert!(before.contains(r#""run":1"#), "{before}");
    // The refusal is the run's alone: other runs' calls go on, each making the record rotate
    // once where it needs to.
    for run in 3..7 {
        assert_eq!(line(run, 0), Ok(()), "run {run}");
        assert_eq!(line(run, 1), Ok(()), "run {run}");
    }
}

fn command(argv: &[&str], extra: JsonValue) -> CodeBindingNamespace {
    let mut behaviour = json!({"command": argv});
    if let (Some(behaviour), Some(extra)) = (behaviour.as_object_mut(), extra.as_object()) {
        behaviour.extend(extra.clone());
    }
    let document = json!({"namespaces": [{"global": "tools", "functions": {"run": behaviour}}]});
    namespaces(document, &Recorder::off()).unwrap().remove(0)
}

#[test]
fn a_command_gets_json_in_and_gives_json_back() {
    let tools = command(
        &["python3", "-c", "import json,sys; print(json.dumps({'got': json.load(sys.stdin)}))"],
        json!({}),
    );
    assert_eq!(call(&tools, "run", json!([1, "two"])), Ok(json!({"got": [1, "two"]})));
    let failing = command(&["sh", "-c", "echo nope >&2; exit 3"], json!({}));
    assert_eq!(call(&failing, "run", json!(null)), Err(("nope".to_owned(), None)));
    let missing = command(&["/nonexistent/tool"], json!({}));
    assert!(
        call(&missing, "run", json!(null))
            .unwrap_err()
            .0
            .starts_with("cannot start /nonexistent/tool")
    );
}

#[test]
fn a_command_leaves_no_process_behind() {
    let scratch = Scratch::new("survivor");
    let pid_file = scratch.0.join("pid");
    // A background grandchild that would live for a minute.
    let script = format!("cat > /dev/null; sleep 60 & echo $! > {}; echo 1", pid_file.display());
    let tools = command(&["sh", "-c", &script], json!({}));
    assert_eq!(call(&tools, "run", json!(null)), Ok(json!(1)));
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    // SAFETY: kill with signal 0 only probes.
    while unsafe { libc::kill(pid, 0) } == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(state.is_empty() || state.contains(") Z "), "the grandchild {pid} survived: {state}");
}

#[test]
fn a_command_timeout_covers_the_whole_exchange() {
    // The command never reads its input, which is larger than a pipe holds: writing stdin blocks.
    let tools = command(&["sleep", "60"], json!({"timeoutMs": 300}));
    let big = json!("x".repeat(1 << 20));
    let start = Instant::now();
    assert_eq!(call(&tools, "run", big), Err(("sleep timed out after 300 ms".to_owned(), None)));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_command_that_prints_without_end_is_cut_off() {
    let tools = command(&["yes"], json!({}));
    let start = Instant::now();
    assert_eq!(
        call(&tools, "run", json!(null)),
        Err(("yes printed more than 16 MiB".to_owned(), None))
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

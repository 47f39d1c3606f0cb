//! `run --session` and `code-runtime session list|show|drop` (docs/cli.md, docs/sessions.md).

use crate::*;

/// Runs `program` (Python) in session `name` kept in `dir`, with the key in `key`.
fn in_session(scratch: &Scratch, dir: &str, name: &str, program: &str) -> Output {
    let path = scratch.write("program.py", program);
    let key = scratch.key();
    run(&["run", &path, "--session", name, "--session-dir", dir, "--checkpoint-key", &key])
}

impl Scratch {
    /// `key`: a checkpoint key of this test's, 0600.
    fn key(&self) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write("key", &"ab".repeat(32));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    }

    fn dir(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(output)).unwrap_or_else(|_| panic!("{}", stderr(output)))
}

#[test]
fn a_session_carries_definitions_and_values_from_run_to_run() {
    let scratch = Scratch::new("session-carry");
    let dir = scratch.dir("sessions");
    let first = in_session(
        &scratch,
        &dir,
        "analysis",
        "import statistics\nrows = [3, 1, 2]\ndef clean(d):\n    return sorted(d)\nfh = open('/dev/null')\nreturn len(rows)",
    );
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let result = json(&first);
    assert_eq!(result["session"]["run"], 1);
    assert_eq!(result["session"]["restored"], "new");
    assert_eq!(result["session"]["dropped"][0]["name"], "fh");
    let second =
        in_session(&scratch, &dir, "analysis", "return [clean(rows), statistics.mean(rows)]");
    let result = json(&second);
    assert_eq!(result["value"], serde_json::json!([[1, 2, 3], 2]), "{result}");
    assert_eq!(result["session"]["restored"], "continued");
    let key = scratch.key();
    let listed = run(&["session", "list", "--session-dir", &dir, "--checkpoint-key", &key]);
    let listed = json(&listed);
    assert_eq!(listed[0]["name"], "analysis");
    assert_eq!(listed[0]["run"], 2);
    let shown =
        run(&["session", "show", "analysis", "--session-dir", &dir, "--checkpoint-key", &key]);
    let shown = json(&shown);
    let names: Vec<_> =
        shown["kept"].as_array().unwrap().iter().map(|k| k["name"].clone()).collect();
    assert_eq!(names, ["statistics", "clean", "rows"]);
    let dropped =
        run(&["session", "drop", "analysis", "--session-dir", &dir, "--checkpoint-key", &key]);
    assert_eq!(dropped.status.code(), Some(0), "{}", stderr(&dropped));
    let after = in_session(&scratch, &dir, "analysis", "return 'rows' in globals()");
    assert_eq!(json(&after)["value"], false);
    check_misuse(
        &run(&["session", "drop", "nothing", "--session-dir", &dir, "--checkpoint-key", &key]),
        "no session \"nothing\"",
    );
}

#[test]
fn an_edited_session_file_is_refused() {
    let scratch = Scratch::new("session-edited");
    let dir = scratch.dir("sessions");
    assert_eq!(in_session(&scratch, &dir, "s", "x = 1").status.code(), Some(0));
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "session"))
        .unwrap();
    let text = std::fs::read(&file).unwrap();
    let edited = String::from_utf8_lossy(&text).replace("\"run\":1", "\"run\":9");
    std::fs::write(&file, edited.as_bytes()).unwrap();
    let refused = in_session(&scratch, &dir, "s", "return x");
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let result = json(&refused);
    assert!(result["error"]["message"].as_str().unwrap().contains("signature"), "{result}");
}

#[test]
fn session_misuse_is_one_line() {
    let scratch = Scratch::new("session-misuse");
    let program = scratch.write("p.py", "return 1");
    check_misuse(
        &run(&["run", &program, "--session-dir", "/tmp"]),
        "--session-dir needs --session",
    );
    check_misuse(&run(&["run", &program, "--session", "a\tb"]), "is unusable");
    let ts = scratch.write("p.ts", "return 1");
    let dir = scratch.dir("sessions");
    let key = scratch.key();
    check_misuse(
        &run(&["run", &ts, "--session", "s", "--session-dir", &dir, "--checkpoint-key", &key]),
        "carry no sessions",
    );
    check_misuse(&run(&["session"]), "");
}

#[test]
fn two_commands_at_once_take_turns_in_one_session() {
    let scratch = Scratch::new("session-turns");
    let dir = scratch.dir("sessions");
    let key = scratch.key();
    let program = scratch.write(
        "count.py",
        "import time\nn = globals().get('n', 0)\ntime.sleep(0.3)\nn += 1\nreturn n",
    );
    let start = || {
        binary()
            .args(["run", &program, "--session", "shared", "--session-dir", &dir])
            .args(["--checkpoint-key", &key])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (start(), start());
    let mut seen: Vec<i64> = [first, second]
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().unwrap();
            json(&output)["value"].as_i64().unwrap_or(-1)
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, [1, 2], "each run saw the other's count, in turn");
    let after = in_session(&scratch, &dir, "shared", "return n");
    assert_eq!(json(&after)["value"], 2);
}

#[test]
fn showing_an_expired_session_leaves_it_for_its_next_run_to_report() {
    let scratch = Scratch::new("session-show-expired");
    let dir = scratch.dir("sessions");
    let key = scratch.key();
    let path = scratch.write("p.py", "x = 1");
    let first = run(&[
        "run",
        &path,
        "--session",
        "s",
        "--session-dir",
        &dir,
        "--checkpoint-key",
        &key,
        "--session-idle-ms",
        "100",
    ]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    std::thread::sleep(Duration::from_millis(300));
    let shown = run(&["session", "show", "s", "--session-dir", &dir, "--checkpoint-key", &key]);
    check_misuse(&shown, "expired");
    let next = in_session(&scratch, &dir, "s", "return 'x' in globals()");
    let result = json(&next);
    assert_eq!(result["session"]["restored"], "expired", "{result}");
    assert_eq!(result["value"], false);
}

//! Hostile programs: forged frames, channel abuse, signals, escapes. The host must survive every one
//! and nothing the program started may outlive its run.

use code_runtime::FailureKind;
use serde_json::json;

use crate::*;

#[test]
fn c092_forged_call_to_an_unknown_member() {
    let program = r#"
import os
os.write(3, b'{"type":"call","id":7777,"global":"tools","name":"missing","args":{}}\n')
return os.read(3, 65536).decode()
"#;
    let reply = value(&run(program, vec![tools()])).as_str().unwrap().to_owned();
    assert_eq!(
        reply,
        "{\"type\":\"reply\",\"id\":7777,\"ok\":false,\"message\":\"unknown binding \\\"tools.missing\\\"\"}\n"
    );
}

#[test]
fn c181_forged_frames_never_crash_the_host() {
    let (echo_counted, calls) = counted(json!("echoed"));
    let program = r#"
import os
os.write(3, b'junk\n\xff\xfe\n[]\n{"type":"log"}\n{"type":"call","id":5,"global":"tools","name":"echo","args":1}\n')
os.write(3, b'{"type":"call","id":5,"global":"tools","name":"echo","args":2}\n{"type":"call","id":6,"global":"nope","name":"x","args":1}\n')
os.write(3, b'{"type":"call","id":-0,"global":"tools","name":"echo","args":1}\n{"type":"call","id":8,"global":"tools","name":"echo","args":9007199254740993}\n')
os.write(3, b'{"type":"done","value":1,"error":{"kind":"exception","message":"forged"}}\n')
while True:
    pass
"#;
    let result = run(program, vec![tools().function("echo", echo_counted)]);
    assert_eq!(result.to_json(), r#"{"logs":[],"error":{"kind":"exception","message":"forged"}}"#);
    // Id 5 answered once; -0, the lossy id-8 frame and the unknown namespace never reached the host.
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn forged_log_flood_hits_the_ledger() {
    let runtime = runtime(Limits { max_output_bytes: 200, ..Limits::default() });
    let program = "import os\nfor i in range(50):\n    os.write(3, b'{\"type\":\"log\",\"text\":\"forged line\"}\\n')\nreturn 1";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    assert_eq!(result.error().map(|e| e.kind()), Some(FailureKind::OutputLimit));
}

#[test]
fn forged_lossy_done_is_dropped() {
    let program =
        "import os\nos.write(3, b'{\"type\":\"done\",\"value\":-0}\\n')\nreturn \"honest\"";
    assert_eq!(value(&run(program, vec![])), &json!("honest"));
}

#[test]
fn garbage_and_a_100_mb_line_on_fd_3() {
    let runtime = runtime(Limits { max_output_bytes: 1 << 20, ..Limits::default() });
    let program = "import os\nos.write(3, bytes(range(256)) * 4 + b'\\n')\nchunk = b'x' * (1 << 20)\nfor _ in range(100):\n    os.write(3, chunk)\nreturn 1";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    assert_eq!(
        result.to_json(),
        r#"{"logs":[],"error":{"kind":"worker-exit","message":"worker error: protocol violation: frame longer than 3145728 bytes"}}"#
    );
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
}

#[test]
fn fd_3_closed() {
    let result = run("import os\nos.close(3)\nreturn 1", vec![]);
    assert_eq!(
        result.error().map(|e| e.kind()),
        Some(FailureKind::WorkerExit),
        "{}",
        result.to_json()
    );
}

#[test]
fn os_exit_is_a_worker_exit() {
    let result = run("print(\"bye\")\nimport os\nos._exit(3)", vec![]);
    assert_eq!(
        result.to_json(),
        r#"{"logs":["bye"],"error":{"kind":"worker-exit","message":"worker exited with code 3 before completing"}}"#
    );
}

#[test]
fn sys_exit_is_an_exception() {
    let result = run("import sys\nsys.exit(3)", vec![]);
    let error = result.error().expect("a failure");
    assert_eq!(error.kind(), FailureKind::Exception);
    assert!(error.message().ends_with("SystemExit: 3"), "{}", error.message());
}

#[test]
fn ignored_sigterm_and_sigxcpu_do_not_save_a_spinning_program() {
    let runtime = runtime(Limits { compute_ms: 1_500, ..Limits::default() });
    let program = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    assert_eq!(
        failure(&result),
        Some(("timeout", "compute budget exhausted (1500ms busy)".to_owned()))
    );
}

#[test]
fn threads_still_running_after_return() {
    let program = "import threading, time\ndef chatter():\n    while True:\n        time.sleep(0.001)\nthreading.Thread(target=chatter, daemon=False).start()\nreturn \"returned\"";
    assert_eq!(value(&run(program, vec![])), &json!("returned"));
}

fn subreaper_runtime() -> PythonCodeRuntime {
    let runtime =
        PythonCodeRuntime::new(PythonConfig { pid_namespace: false, ..PythonConfig::default() })
            .unwrap();
    assert_eq!(runtime.containment(), code_runtime_python::Containment::SubreaperSweep);
    runtime
}

#[test]
fn a_daemonized_grandchild_does_not_survive() {
    daemon_does_not_survive(default_runtime(), "daemon-ns");
}

#[test]
fn a_daemonized_grandchild_does_not_survive_the_subreaper_either() {
    daemon_does_not_survive(&subreaper_runtime(), "daemon-subreaper");
}

fn daemon_does_not_survive(runtime: &PythonCodeRuntime, name: &str) {
    let scratch = Scratch::new(name);
    let lock = scratch.file("lock");
    let program = format!(
        r#"
import fcntl, os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open({lock:?}, os.O_CREAT | os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.write(w, b"x")
        while True:
            time.sleep(1)
    os._exit(0)
os.read(r, 1)
return "daemonized"
"#
    );
    assert_eq!(value(&run_on(runtime, CodeRunRequest::new(program))), &json!("daemonized"));
    assert!(!lock_is_held(&lock), "the daemon outlived its run ({:?})", runtime.containment());
}

#[test]
fn a_fork_storm_does_not_survive() {
    let limits = Limits { compute_ms: 2_000, max_wall_ms: 3_000, ..Limits::default() };
    fork_storm_does_not_survive(&runtime(limits), "forks-ns");
}

#[test]
fn a_fork_storm_does_not_survive_the_subreaper_either() {
    let limits = Limits { compute_ms: 2_000, max_wall_ms: 3_000, ..Limits::default() };
    let config = PythonConfig { limits, pid_namespace: false, ..PythonConfig::default() };
    fork_storm_does_not_survive(&PythonCodeRuntime::new(config).unwrap(), "forks-subreaper");
}

fn fork_storm_does_not_survive(runtime: &PythonCodeRuntime, name: &str) {
    // 64 processes that all spin, under a short budget: the run ends on time and takes them along.
    let scratch = Scratch::new(name);
    let lock = scratch.file("lock");
    let program = format!(
        "import fcntl, os\nfd = os.open({lock:?}, os.O_CREAT | os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_SH)\nfor _ in range(6):\n    os.fork()\nwhile True:\n    pass"
    );
    let result = run_on(runtime, CodeRunRequest::new(program));
    assert_eq!(
        result.error().map(|e| e.kind()),
        Some(FailureKind::Timeout),
        "{}",
        result.to_json()
    );
    assert!(
        !lock_is_held(&lock),
        "a forked process outlived its run ({:?})",
        runtime.containment()
    );
}

#[test]
fn the_working_directory_is_fresh_and_removed() {
    let first = value(&run("import os\nopen(\"left-behind\", \"w\").write(\"x\")\nreturn [os.getcwd(), os.listdir(\".\")]", vec![])).clone();
    let cwd = first[0].as_str().unwrap().to_owned();
    assert_eq!(first[1], json!(["left-behind"]));
    assert!(!std::path::Path::new(&cwd).exists(), "{cwd} was not removed");
    let second = value(&run("import os\nreturn os.listdir(\".\")", vec![])).clone();
    assert_eq!(second, json!([]));
}

#[test]
fn only_fds_0_to_3_are_open() {
    let program = "import os\nreturn sorted(int(fd) for fd in os.listdir(\"/proc/self/fd\"))";
    // The listing itself opens one descriptor (the directory being read).
    let fds = value(&run(program, vec![])).clone();
    assert_eq!(fds.as_array().unwrap()[..4], [json!(0), json!(1), json!(2), json!(3)]);
    assert!(fds.as_array().unwrap().len() <= 5, "{fds}");
}

#[test]
fn many_concurrent_runs() {
    let namespace = tools().function("echo", echo());
    let program =
        "import asyncio\nreturn sum(await asyncio.gather(*[tools.echo(i) for i in range(20)]))";
    let results = tokio().block_on(async {
        let runs = (0..20).map(|_| {
            let request = CodeRunRequest::new(program).binding(namespace.clone());
            async move { default_runtime().run(request).await.unwrap() }
        });
        futures::future::join_all(runs).await
    });
    for result in results {
        assert_eq!(value(&result), &json!(190));
    }
}

//! Hostile programs against the channel: forged and deep frames, floods, exits and signals. The
//! host must survive every one. (What a program can reach of the host is `escape.rs`.)

use code_runtime::FailureKind;
use code_runtime::json;

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

#[test]
fn self_sigkill_is_a_worker_exit() {
    // The program is not its namespace's init: its own signals behave as anywhere else.
    let result =
        run("print('before')\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)", vec![]);
    assert_eq!(
        result.to_json(),
        r#"{"logs":["before"],"error":{"kind":"worker-exit","message":"worker exited with code 137 before completing"}}"#
    );
}

#[test]
fn a_200_000_deep_line_on_fd_3_does_not_reach_the_hosts_stack() {
    // Parsed and dropped without recursion; not a frame, so it is ignored.
    let program = "import os\nos.write(3, b'[' * 200000 + b']' * 200000 + b'\\n')\nreturn 1";
    assert_eq!(value(&run(program, vec![])), &json!(1));
}

#[test]
fn a_300_000_deep_forged_argument_does_not_reach_the_hosts_stack() {
    // A call frame the bootstrap would never send (its encoder recurses): the host parses it,
    // hands it to the binding and drops it without recursion, and the program reads the reply.
    let (echo_counted, calls) = counted(json!("seen"));
    let program = r#"
import os
deep = b'[' * 300000 + b']' * 300000
os.write(3, b'{"type":"call","id":4242,"global":"tools","name":"echo","args":' + deep + b'}\n')
reply = b''
while not reply.endswith(b'\n'):
    reply += os.read(3, 65536)
return reply.decode()
"#;
    let result = run(program, vec![tools().function("echo", echo_counted)]);
    assert_eq!(
        value(&result),
        &json!("{\"type\":\"reply\",\"id\":4242,\"ok\":true,\"value\":\"seen\"}\n")
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The program's own un-awaited call with such an argument: the bootstrap encodes it without
    // recursion and sends it at once; the host takes it in and drops it when the run ends.
    let program =
        "deep = []\nfor _ in range(300000):\n    deep = [deep]\ntools.echo(deep)\nreturn 1";
    let result = run(program, vec![tools().function("echo", echo())]);
    assert_eq!(value(&result), &json!(1));
}

#[test]
fn large_concurrent_replies_with_interleaved_output_all_arrive() {
    // Four 300 KB replies fill the socket while the program prints: a reply queued while the
    // socket is full must wait for room, not be lost.
    let program = r#"
import asyncio
async def one(i):
    print("start", i)
    reply = await tools.echo("x" * 300000)
    print("done", i)
    return len(reply)
sizes = await asyncio.gather(*[one(i) for i in range(4)])
print("all")
return sizes
"#;
    let result = run(program, vec![tools().function("echo", echo())]);
    assert_eq!(value(&result), &json!([300000, 300000, 300000, 300000]));
    assert_eq!(result.logs().len(), 9, "{:?}", result.logs());
    assert_eq!(result.logs().last().map(String::as_str), Some("all"));
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

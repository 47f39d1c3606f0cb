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

/// The host's refusal of a run that made it hold too much.
const HOST_MEMORY: &str = "what the program handed the host (values, calls, output) exceeded its";

#[test]
fn a_deep_value_followed_by_garbage_on_fd_3_is_dropped_without_recursion() {
    // The parser holds a finished deep value when it meets the garbage after it: dropping it must
    // not recurse (130 000 levels killed the command line, 40 000 the MCP server's workers).
    let program = r#"
import os
for n in (40_000, 130_000, 1_000_000):
    os.write(3, ("[" * n + "]" * n + " x\n").encode())
    os.write(3, ('{"type":"call","id":%d,"global":"tools","name":"echo","args":' % n + "[" * n + "]" * n + "}}\n").encode())
    os.write(3, ('{"type":"done","value":' + "{\"k\":" * n + "1" + "}" * n + "]}\n").encode())
return "survived"
"#;
    let (echo_counted, calls) = counted(json!(1));
    let result = run(program, vec![tools().function("echo", echo_counted)]);
    assert_eq!(value(&result), &json!("survived"));
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0, "none was a frame");
}

#[test]
fn a_million_deep_value_crosses_both_ways() {
    let program = r#"
import os
n = 1_000_000
deep = "[" * n + "]" * n
os.write(3, ('{"type":"call","id":1,"global":"tools","name":"echo","args":' + deep + '}\n').encode())
reply = b""
while not reply.endswith(b"\n"):
    reply += os.read(3, 1 << 20)
os.write(3, ('{"type":"done","value":' + deep + '}\n').encode())
while True:
    pass
"#;
    let result = run(program, vec![tools().function("echo", echo())]);
    let expected = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
    assert_eq!(json::encode(value(&result)), expected);
}

#[test]
fn a_120_mb_line_of_zeros_is_held_to_the_memory_budget() {
    // Two bytes of text, `0,`, make a 32-byte value: parsed whole, this line took 4.3 GB of host
    // memory under a 256 MB budget. It is now charged as it is read and parsed.
    let runtime = runtime(Limits { max_memory_mb: 256, ..Limits::default() });
    let program = r#"
import os
os.write(3, b'{"type":"done","value":[')
chunk = b"0," * (1 << 20)
for _ in range(60):
    os.write(3, chunk)
os.write(3, b'0]}\n')
return 1
"#;
    let result = run_on(&runtime, CodeRunRequest::new(program));
    let (kind, message) = failure(&result).expect("a failure");
    assert_eq!(kind, "worker-exit");
    assert!(message.contains(HOST_MEMORY) && message.contains("256 MB"), "{message}");
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
}

#[test]
fn a_line_longer_than_the_memory_budget_ends_the_run_as_it_arrives() {
    let runtime = runtime(Limits { max_memory_mb: 16, ..Limits::default() });
    let program = "import os\nchunk = b'x' * (1 << 20)\nfor _ in range(40):\n    os.write(3, chunk)\nreturn 1";
    let (kind, message) = failure(&run_on(&runtime, CodeRunRequest::new(program))).unwrap();
    assert_eq!(kind, "worker-exit");
    assert!(message.contains(HOST_MEMORY), "{message}");
}

#[test]
fn calls_of_unknown_bindings_are_counted_and_their_answers_bounded() {
    // 40 forged calls whose names are 8 MB each, never read: the answers used to repeat each name
    // and queue without bound. They now count against the call budget, and each answer quotes at
    // most 200 bytes of the name.
    let runtime = runtime(Limits { max_calls: 5, ..Limits::default() });
    let program = r#"
import os
name = "n" * (8 << 20)
for i in range(40):
    os.write(3, ('{"type":"call","id":%d,"global":"tools","name":"%s","args":null}\n' % (1000 + i, name)).encode())
answers = b""
while answers.count(b"\n") < 40:
    answers += os.read(3, 1 << 20)
lines = answers.decode().splitlines()
return [len(answers), sum("unknown binding" in line for line in lines), sum("at most 5 binding calls" in line for line in lines)]
"#;
    let result = run_on(
        &runtime,
        CodeRunRequest { bindings: vec![tools()], ..CodeRunRequest::new(program) },
    );
    let counts = value(&result);
    assert_eq!((&counts[1], &counts[2]), (&json!(5), &json!(35)), "{counts}");
    assert!(counts[0].as_u64().unwrap() < 40 * 400, "{counts}");
}

#[test]
fn answers_a_program_never_reads_are_held_to_the_memory_budget() {
    // Each call is answered with 4 MB; the program makes 200 and never reads fd 3.
    let runtime = runtime(Limits { max_memory_mb: 64, ..Limits::default() });
    let big = binding(|_| async move { Ok(json!("x".repeat(4 << 20))) });
    let program = r#"
import os
for i in range(200):
    os.write(3, b'{"type":"call","id":%d,"global":"tools","name":"big","args":null}\n' % i)
import time
time.sleep(30)
return 1
"#;
    let request = CodeRunRequest {
        bindings: vec![tools().function("big", big)],
        ..CodeRunRequest::new(program)
    };
    let (kind, message) = failure(&run_on(&runtime, request)).unwrap();
    assert_eq!(kind, "worker-exit");
    assert!(message.contains(HOST_MEMORY), "{message}");
}

#[test]
fn many_empty_lines_are_charged_per_line() {
    // 22 million empty lines fit a 64 MiB output budget; each costs the host a string of its own.
    let runtime = runtime(Limits { max_memory_mb: 32, ..Limits::default() });
    let program = "import os\nfor _ in range(2_000_000):\n    os.write(3, b'{\"type\":\"log\",\"text\":\"\"}\\n')\nreturn 1";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    let (kind, message) = failure(&result).unwrap();
    assert_eq!(kind, "worker-exit");
    assert!(message.contains(HOST_MEMORY), "{message}");
    // What was admitted before the budget ran out is kept, and it fits it.
    assert!(!result.logs().is_empty() && result.logs().len() < (32 << 20) / 64);
}

#[test]
fn gather_over_five_times_the_pending_budget_runs_every_call() {
    let program = "import asyncio\nall = await asyncio.gather(*(tools.echo(i) for i in range(5000)))\nreturn [len(all), all[4999]]";
    let result = run(program, vec![tools().function("echo", echo())]);
    assert_eq!(value(&result), &json!([5000, 4999]));
}

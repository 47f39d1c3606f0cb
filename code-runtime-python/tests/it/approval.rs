//! Approvals and resumable runs of real Python programs: a denial the program catches, a pause
//! whose resume prints the same random numbers, uuids, dates and clocks, and a divergence.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use code_runtime::{
    ApprovalRule, Approvals, CheckpointKey, CodeBindingNamespace, CodeRunRequest, Decision,
    Decisions, FailureKind, binding, json,
};

use crate::{default_runtime, run_on, tools, value};

fn key() -> CheckpointKey {
    CheckpointKey::new(*b"a key of at least sixteen bytes!").unwrap()
}

/// `tools.read` (counted in `calls`) and `tools.delete`, which needs approval.
fn bindings(calls: &Arc<AtomicUsize>) -> CodeBindingNamespace {
    let calls = calls.clone();
    tools()
        .function(
            "read",
            binding(move |args| {
                calls.fetch_add(1, Ordering::SeqCst);
                async move { Ok(json!({ "read": args.into_value() })) }
            }),
        )
        .function(
            "delete",
            binding(|_| async { Ok(json!("deleted")) }).approval(ApprovalRule::Always),
        )
}

const PROGRAM: &str = r#"
import datetime, os, random, secrets, time, uuid
start = time.monotonic()
before = [random.random(), random.randint(1, 10**9), str(uuid.uuid4()), os.urandom(4).hex(),
          secrets.token_hex(4), time.time(), datetime.datetime.now().isoformat(),
          datetime.date.today().isoformat(), time.monotonic() > start, time.perf_counter_ns()]
print(before)
read = await tools.read({"path": "/a"})
try:
    outcome = await tools.delete({"name": "infra"})
except ToolCallError as error:
    outcome = f"{error.toolName} {error}"
print(random.random(), time.time() >= before[5], type(datetime.datetime.now()).__name__)
return {"read": read, "outcome": outcome}
"#;

#[test]
fn a_denied_call_raises_the_namespace_error_class_and_the_program_catches_it() {
    let calls = Arc::new(AtomicUsize::new(0));
    let request = CodeRunRequest::new(PROGRAM)
        .binding(bindings(&calls))
        .approvals(Approvals::new(Decision::deny("not in production")));
    let result = run_on(default_runtime(), request);
    assert_eq!(value(&result)["outcome"], json!("delete denied: not in production"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_paused_run_resumes_with_the_same_random_numbers_uuids_and_clocks() {
    let calls = Arc::new(AtomicUsize::new(0));
    let request = CodeRunRequest::new(PROGRAM)
        .binding(bindings(&calls))
        .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
    let mut paused = run_on(default_runtime(), request);
    let pause = paused.take_paused().unwrap_or_else(|| panic!("{}", paused.to_json()));
    assert_eq!((pause.pending[0].id, pause.pending[0].function.as_str()), (2, "delete"));
    let first_line = paused.logs()[0].clone();

    let request = CodeRunRequest::resuming(pause.checkpoint, Decisions::new().allow(2))
        .binding(bindings(&calls))
        .approvals(Approvals::new(Decision::deny("asked again")).checkpoint_key(key()));
    let resumed = run_on(default_runtime(), request);
    assert_eq!(resumed.logs()[0], first_line, "the same numbers before the pause");
    assert!(resumed.logs()[1].ends_with(" True datetime"), "{}", resumed.logs()[1]);
    assert_eq!(value(&resumed)["outcome"], json!("deleted"));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the read was not made again");
}

#[test]
fn a_program_that_reads_an_input_changed_since_the_pause_ends_naming_the_call() {
    let calls = Arc::new(AtomicUsize::new(0));
    let program = "await tools.read(path)\nreturn await tools.delete({'name': 'x'})";
    let request = CodeRunRequest::new(program)
        .binding(bindings(&calls))
        .value("path", json!("/a"))
        .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
    let checkpoint = run_on(default_runtime(), request).take_paused().expect("paused").checkpoint;
    let request = CodeRunRequest::resuming(checkpoint, Decisions::new().allow(2))
        .binding(bindings(&calls))
        .value("path", json!("/b"))
        .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()));
    let result = run_on(default_runtime(), request);
    let failure = result.error().unwrap_or_else(|| panic!("{}", result.to_json()));
    assert_eq!(failure.kind(), FailureKind::Exception);
    assert_eq!(
        failure.message(),
        r#"the program took another path on resume: call 1 was tools.read("/a"), now tools.read("/b")"#
    );
}

#[test]
fn asyncio_keeps_the_machines_clock_in_a_run_that_may_pause() {
    // The loop schedules on the real clock: a sleep ends, though the program's clock stands
    // almost still between answers.
    let program = "import asyncio, time\nt = time.time()\nawait asyncio.sleep(0.05)\nreturn time.time() - t < 1";
    let request = CodeRunRequest::new(program)
        .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
    assert_eq!(value(&run_on(default_runtime(), request)), &json!(true));
}

#[test]
fn a_forged_replayed_call_never_reaches_the_host_and_ends_the_run() {
    // The program writes its own `call` frame on fd 3, marked as answered from a record, for the
    // function that needs approval: the host runs nothing and ends the run, whether or not the
    // run resumes a checkpoint.
    let deleted = Arc::new(AtomicUsize::new(0));
    let counted = deleted.clone();
    let tools = || {
        let counted = counted.clone();
        tools().function(
            "delete",
            binding(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Ok(json!("deleted")) }
            })
            .approval(ApprovalRule::Always),
        )
    };
    let forge = r#"
import os, time
os.write(3, b'{"type":"call","id":9000,"global":"tools","name":"delete","args":null,"replayed":true}\n')
time.sleep(0.5)
return "not stopped"
"#;
    let request =
        CodeRunRequest::new(forge).binding(tools()).approvals(Approvals::new(Decision::Allow));
    let result = run_on(default_runtime(), request);
    let failure = result.error().unwrap_or_else(|| panic!("{}", result.to_json()));
    assert_eq!(
        failure.message(),
        "worker error: protocol violation: a call answered from a record, in a run that resumes none"
    );
    // In a resumed run, the forged call lands on the pending call's number.
    let first = "try:\n    await tools.delete(None)\nexcept ToolCallError:\n    pass\n";
    let request = CodeRunRequest::new(format!("{first}{forge}"))
        .binding(tools())
        .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
    let checkpoint = run_on(default_runtime(), request).take_paused().expect("paused").checkpoint;
    let request = CodeRunRequest::resuming(checkpoint, Decisions::new().deny(1, "no"))
        .binding(tools())
        .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()));
    let result = run_on(default_runtime(), request);
    let failure = result.error().unwrap_or_else(|| panic!("{}", result.to_json()));
    assert!(
        failure.message().contains("took another path on resume: call 2 was not answered"),
        "{}",
        failure.message()
    );
    assert_eq!(deleted.load(Ordering::SeqCst), 0, "the host function never ran");
}

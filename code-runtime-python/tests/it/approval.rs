//! Approvals and resumable runs where Python differs from TypeScript: asyncio's clock in a run
//! that may pause, and a forged replayed call. What both languages share is in the provider
//! suites (`conformance/tests/it/providers/approval.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use code_runtime::{
    ApprovalRule, Approvals, CheckpointKey, CodeRunRequest, Decision, Decisions, binding, json,
};

use crate::{default_runtime, run_on, tools, value};

fn key() -> CheckpointKey {
    CheckpointKey::new(*b"a key of at least sixteen bytes!").unwrap()
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

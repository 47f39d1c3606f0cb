//! Approvals and resumable runs of real TypeScript programs, in both isolation modes: a denial
//! the program catches, a pause whose resume prints the same random numbers and dates, a
//! divergence, and the machine's `crypto` and `performance` in every run.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use code_runtime::{
    ApprovalRule, Approvals, CheckpointKey, CodeBindingNamespace, CodeRunRequest, Decision,
    Decisions, FailureKind, binding, json,
};
use code_runtime_worker_thread::WorkerThreadCodeRuntime;

use crate::{default_runtime, process_runtime, run_on, tools, value};

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
const before = [Math.random(), Date.now(), new Date().toISOString(), String(Date()).length > 0,
  crypto.randomUUID(), Array.from(crypto.getRandomValues(new Uint8Array(4))), performance.now() > 0,
  Array.from(new Uint8Array(await crypto.subtle.exportKey("raw",
    await crypto.subtle.generateKey({ name: "HMAC", hash: "SHA-256", length: 64 }, true, ["sign"]))))];
console.log(JSON.stringify(before));
const read = await tools.read({ path: "/a" });
let outcome;
try {
  outcome = await tools.delete({ name: "infra" });
} catch (error) {
  outcome = `${error instanceof ToolCallError} ${error.toolName} ${error.message}`;
}
console.log(JSON.stringify([Math.random(), Date.now() >= before[1], new Date(0).getTime()]));
return { read, outcome };
"#;

fn both_modes(check: impl Fn(&WorkerThreadCodeRuntime, &str)) {
    check(default_runtime(), "thread");
    check(&process_runtime(code_runtime::Limits::default()), "process");
}

#[test]
fn a_denied_call_rejects_with_the_namespace_error_class_and_the_program_catches_it() {
    both_modes(|runtime, mode| {
        let calls = Arc::new(AtomicUsize::new(0));
        let request = CodeRunRequest::new(PROGRAM)
            .binding(bindings(&calls))
            .approvals(Approvals::new(Decision::deny("not in production")));
        let result = run_on(runtime, request);
        assert_eq!(
            value(&result)["outcome"],
            json!("true delete denied: not in production"),
            "{mode}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_paused_run_resumes_with_the_same_random_numbers_and_dates() {
    both_modes(|runtime, mode| {
        let calls = Arc::new(AtomicUsize::new(0));
        let request = CodeRunRequest::new(PROGRAM)
            .binding(bindings(&calls))
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
        let mut paused = run_on(runtime, request);
        let pause = paused.take_paused().unwrap_or_else(|| panic!("{mode}: {}", paused.to_json()));
        assert_eq!(pause.pending.len(), 1);
        assert_eq!((pause.pending[0].id, pause.pending[0].function.as_str()), (2, "delete"));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let first_line = paused.logs()[0].clone();

        let request = CodeRunRequest::resuming(pause.checkpoint, Decisions::new().allow(2))
            .binding(bindings(&calls))
            .approvals(Approvals::new(Decision::deny("asked again")).checkpoint_key(key()));
        let resumed = run_on(runtime, request);
        assert_eq!(resumed.logs()[0], first_line, "{mode}: the same numbers before the pause");
        let after: serde_json::Value = serde_json::from_str(&resumed.logs()[1]).unwrap();
        assert_eq!((after[1].as_bool(), after[2].as_i64()), (Some(true), Some(0)), "{mode}");
        assert_eq!(value(&resumed)["outcome"], json!("deleted"), "{mode}");
        assert_eq!(value(&resumed)["read"], json!({ "read": { "path": "/a" } }));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{mode}: the read was not made again");
    });
}

#[test]
fn a_program_that_reads_an_input_changed_since_the_pause_ends_naming_the_call() {
    both_modes(|runtime, mode| {
        let calls = Arc::new(AtomicUsize::new(0));
        let program = "await tools.read(path); return await tools.delete({ name: 'x' });";
        let request = CodeRunRequest::new(program)
            .binding(bindings(&calls))
            .value("path", json!("/a"))
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
        let checkpoint = run_on(runtime, request).take_paused().expect("paused").checkpoint;
        let request = CodeRunRequest::resuming(checkpoint, Decisions::new().allow(2))
            .binding(bindings(&calls))
            .value("path", json!("/b"))
            .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()));
        let result = run_on(runtime, request);
        let failure = result.error().unwrap_or_else(|| panic!("{mode}: {}", result.to_json()));
        assert_eq!(failure.kind(), FailureKind::Exception);
        assert_eq!(
            failure.message(),
            r#"the program took another path on resume: call 1 was tools.read("/a"), now tools.read("/b")"#
        );
    });
}

#[test]
fn every_run_has_crypto_and_performance_and_the_machines_numbers_differ() {
    both_modes(|runtime, mode| {
        let program = "return [Math.random(), crypto.randomUUID(), typeof performance.now()]";
        let first = run_on(runtime, CodeRunRequest::new(program));
        let second = run_on(runtime, CodeRunRequest::new(program));
        assert_eq!(value(&first)[2], json!("number"), "{mode}");
        assert_ne!(value(&first)[0], value(&second)[0], "{mode}");
        assert_ne!(value(&first)[1], value(&second)[1], "{mode}");
        let uuid = value(&first)[1].as_str().unwrap().to_owned();
        assert_eq!((uuid.len(), &uuid[14..15]), (36, "4"), "{mode}: {uuid}");
        let refused =
            run_on(runtime, CodeRunRequest::new("crypto.getRandomValues(new Float64Array(2))"));
        assert!(refused.error().unwrap().message().contains("integer typed array"), "{mode}");
    });
}

#[test]
fn a_resumed_race_is_won_by_the_call_that_won_it_first() {
    both_modes(|runtime, mode| {
        let calls = Arc::new(AtomicUsize::new(0));
        let slow = binding(|_| async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            Ok(json!("slow"))
        });
        let namespace = || bindings(&calls).function("slow", slow.clone());
        let program = r#"
            const winner = await Promise.race([tools.slow(), tools.read("fast")]);
            console.log(JSON.stringify(winner));
            return await tools.delete({ name: "x" });
        "#;
        let request = CodeRunRequest::new(program)
            .binding(namespace())
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
        let mut paused = run_on(runtime, request);
        let checkpoint = paused.take_paused().expect("paused").checkpoint;
        assert_eq!(paused.logs(), [r#"{"read":"fast"}"#], "{mode}");
        let request = CodeRunRequest::resuming(checkpoint, Decisions::new().allow(3))
            .binding(namespace())
            .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()));
        let resumed = run_on(runtime, request);
        assert_eq!(resumed.logs(), [r#"{"read":"fast"}"#], "{mode}: the same winner");
        assert_eq!(value(&resumed), &json!("deleted"), "{mode}");
    });
}

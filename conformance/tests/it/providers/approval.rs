//! Approvals and resumable runs of real programs on every provider: a denial the program
//! catches as the namespace's error class, a pause whose resume prints the same random numbers,
//! identifiers and clocks, a program that takes another path on resume, and a race a resume
//! gives to the call that won it first.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use code_runtime::{
    ApprovalRule, Approvals, CheckpointKey, CodeBindingNamespace, CodeRunRequest, Decision,
    Decisions, FailureKind, binding, json,
};

use super::{each_provider, tools, value};

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

/// Logs what the machine gives before the approval (random numbers, identifiers, the clocks),
/// reads, asks for the delete, and logs whether the clocks still run forward after it.
const TYPESCRIPT: &str = r#"
const before = [Math.random(), Date.now(), new Date().toISOString(), String(Date()).length > 0,
  crypto.randomUUID(), Array.from(crypto.getRandomValues(new Uint8Array(4))), performance.now() > 0,
  Array.from(new Uint8Array(await crypto.subtle.exportKey("raw",
    await crypto.subtle.generateKey({ name: "HMAC", hash: "SHA-256", length: 64 }, true, ["sign"]))))];
console.log(JSON.stringify(before));
const read = await tools.read({ path: "/a" });
let outcome, caught;
try {
  outcome = await tools.delete({ name: "infra" });
} catch (error) {
  outcome = `${error.toolName} ${error.message}`;
  caught = error instanceof ToolCallError;
}
console.log(JSON.stringify([Date.now() >= before[1], new Date(0).getTime() === 0]));
return { read, outcome, caught: caught ?? null };
"#;

const PYTHON: &str = r#"
import datetime, json, os, random, secrets, time, uuid
start = time.monotonic()
before = [random.random(), random.randint(1, 10**9), str(uuid.uuid4()), os.urandom(4).hex(),
          secrets.token_hex(4), time.time(), datetime.datetime.now().isoformat(),
          datetime.date.today().isoformat(), time.monotonic() > start, time.perf_counter_ns()]
print(before)
read = await tools.read({"path": "/a"})
caught = None
try:
    outcome = await tools.delete({"name": "infra"})
except ToolCallError as error:
    outcome = f"{error.toolName} {error}"
    caught = isinstance(error, ToolCallError)
print(json.dumps([time.time() >= before[5], type(datetime.datetime.now()).__name__ == "datetime"]))
return {"read": read, "outcome": outcome, "caught": caught}
"#;

#[test]
fn a_denied_call_rejects_with_the_namespace_error_class_and_the_program_catches_it() {
    each_provider(|provider| {
        let calls = Arc::new(AtomicUsize::new(0));
        let request = CodeRunRequest::new(provider.program(TYPESCRIPT, PYTHON))
            .binding(bindings(&calls))
            .approvals(Approvals::new(Decision::deny("not in production")));
        let result = provider.run(request);
        assert_eq!(
            value(&result)["outcome"],
            json!("delete denied: not in production"),
            "{provider}"
        );
        assert_eq!(value(&result)["caught"], json!(true), "{provider}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{provider}");
    });
}

#[test]
fn a_paused_run_resumes_with_the_same_random_numbers_identifiers_and_clocks() {
    each_provider(|provider| {
        let calls = Arc::new(AtomicUsize::new(0));
        let request = CodeRunRequest::new(provider.program(TYPESCRIPT, PYTHON))
            .binding(bindings(&calls))
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
        let mut paused = provider.run(request);
        let pause =
            paused.take_paused().unwrap_or_else(|| panic!("{provider}: {}", paused.to_json()));
        assert_eq!(pause.pending.len(), 1, "{provider}");
        assert_eq!((pause.pending[0].id, pause.pending[0].function.as_str()), (2, "delete"));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{provider}");
        let first_line = paused.logs()[0].clone();

        let request = CodeRunRequest::resuming(pause.checkpoint, Decisions::new().allow(2))
            .binding(bindings(&calls))
            .approvals(Approvals::new(Decision::deny("asked again")).checkpoint_key(key()));
        let resumed = provider.run(request);
        assert_eq!(resumed.logs()[0], first_line, "{provider}: the same numbers before the pause");
        // The clocks ran forward across the pause (JSON as each language's library spells it).
        let forward = provider.program("[true,true]", "[true, true]");
        assert_eq!(resumed.logs()[1], forward, "{provider}");
        assert_eq!(value(&resumed)["outcome"], json!("deleted"), "{provider}");
        assert_eq!(value(&resumed)["read"], json!({ "read": { "path": "/a" } }), "{provider}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{provider}: the read was not made again");
    });
}

#[test]
fn a_program_that_reads_an_input_changed_since_the_pause_ends_naming_the_call() {
    each_provider(|provider| {
        let calls = Arc::new(AtomicUsize::new(0));
        let program = provider.program(
            "await tools.read(path); return await tools.delete({ name: 'x' });",
            "await tools.read(path)\nreturn await tools.delete({'name': 'x'})",
        );
        let request = CodeRunRequest::new(program)
            .binding(bindings(&calls))
            .value("path", json!("/a"))
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
        let checkpoint = provider.run(request).take_paused().expect("paused").checkpoint;
        let request = CodeRunRequest::resuming(checkpoint, Decisions::new().allow(2))
            .binding(bindings(&calls))
            .value("path", json!("/b"))
            .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()));
        let result = provider.run(request);
        let failure = result.error().unwrap_or_else(|| panic!("{provider}: {}", result.to_json()));
        assert_eq!(failure.kind(), FailureKind::Exception, "{provider}");
        assert_eq!(
            failure.message(),
            r#"the program took another path on resume: call 1 was tools.read("/a"), now tools.read("/b")"#,
            "{provider}"
        );
    });
}

#[test]
fn a_resumed_race_is_won_by_the_call_that_won_it_first() {
    each_provider(|provider| {
        let calls = Arc::new(AtomicUsize::new(0));
        let slow = binding(|_| async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            Ok(json!("slow"))
        });
        let namespace = || bindings(&calls).function("slow", slow.clone());
        let program = provider.program(
            r#"
            const winner = await Promise.race([tools.slow(), tools.read("fast")]);
            console.log(JSON.stringify(winner));
            return await tools.delete({ name: "x" });
            "#,
            r#"
import asyncio, json
racing = [asyncio.ensure_future(tools.slow()), asyncio.ensure_future(tools.read("fast"))]
winner = await next(asyncio.as_completed(racing))
print(json.dumps(winner, separators=(",", ":")))
return await tools.delete({"name": "x"})
"#,
        );
        let request = CodeRunRequest::new(program)
            .binding(namespace())
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
        let mut paused = provider.run(request);
        let checkpoint = paused
            .take_paused()
            .unwrap_or_else(|| panic!("{provider}: {}", paused.to_json()))
            .checkpoint;
        assert_eq!(paused.logs(), [r#"{"read":"fast"}"#], "{provider}");
        let request = CodeRunRequest::resuming(checkpoint, Decisions::new().allow(3))
            .binding(namespace())
            .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()));
        let resumed = provider.run(request);
        assert_eq!(resumed.logs(), [r#"{"read":"fast"}"#], "{provider}: the same winner");
        assert_eq!(value(&resumed), &json!("deleted"), "{provider}");
    });
}

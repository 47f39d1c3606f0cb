//! Approvals and resumable runs through the host loop, with a scripted substrate: allow, deny,
//! pause and resume, replay in the first order, divergence, tampering, the wall clock standing
//! still while a decision is pending, and the approval timeout.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use code_runtime::json;
use code_runtime::provider::{Determinism, Ending, Event, FunctionId};
use code_runtime::{
    ApprovalRule, Approvals, BindingArgs, CheckpointError, CheckpointKey, CodeBindingNamespace,
    CodeRunRequest, CodeRunResult, CodeRuntime, ContractError, Decision, Decisions, EventSink,
    FailureKind, JsonValue, Limits, RunEvent, approver_fn, binding,
};

use crate::failed;
use crate::fake::{FakeProvider, Script};

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn call(id: u64, function: u32, args: JsonValue) -> Event {
    Event::Call { id, function: FunctionId::new(function), args: BindingArgs::new(args) }
}

fn key() -> CheckpointKey {
    CheckpointKey::new(vec![42; 32]).unwrap()
}

/// `tools.read` (0, never asked about), `tools.delete` (1, always), `tools.write` (2, asked
/// when `force` is true); every call counted in `calls`.
fn tools(calls: &Arc<AtomicUsize>) -> CodeBindingNamespace {
    let counted = |calls: &Arc<AtomicUsize>| {
        let calls = calls.clone();
        binding(move |args| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Ok(json!({ "did": args.into_value() })) }
        })
    };
    CodeBindingNamespace::new("tools")
        .function("read", counted(calls))
        .function("delete", counted(calls).approval(ApprovalRule::Always))
        .function(
            "write",
            counted(calls).approval(ApprovalRule::When(json!({
                "properties": { "force": { "const": true } },
                "required": ["force"],
            }))),
        )
        .error_class("ToolError", "tool")
}

/// Runs `request` on a fresh scripted provider, playing `play` as the substrate.
async fn run_with<F, Fut>(limits: Limits, request: CodeRunRequest, play: F) -> CodeRunResult
where
    F: FnOnce(Script) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    run_seen(limits, request, play).await.0
}

/// [`run_with`], with the substrate's [`Determinism`] and the clock readings its answers
/// carried.
async fn run_seen<F, Fut>(
    limits: Limits,
    request: CodeRunRequest,
    play: F,
) -> (CodeRunResult, Option<Determinism>, Vec<f64>)
where
    F: FnOnce(Script) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (runtime, mut scripts) = FakeProvider::new("typescript", limits, 8);
    let run = tokio::spawn(async move { runtime.run(request).await });
    let script = scripts.recv().await.unwrap();
    let (determinism, state) = (script.determinism, script.state.clone());
    play(script).await;
    let result = run.await.unwrap().unwrap();
    let clocks = state.clocks.lock().unwrap().clone();
    (result, determinism, clocks)
}

async fn answered(script: &mut Script) -> (u64, Result<JsonValue, String>) {
    let (id, outcome) = script.settled.recv().await.unwrap();
    (id, outcome.map_err(|error| error.message().to_owned()))
}

#[test]
fn an_allowed_call_runs_a_denied_one_rejects_and_an_unmarked_one_is_not_asked() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        let approvals = Approvals::new(approver_fn(move |request| {
            seen.lock().unwrap().push((request.call, request.summary.clone()));
            let decision = if request.function == "delete" {
                Decision::deny("not on Fridays")
            } else {
                Decision::Allow
            };
            async move { decision }
        }));
        let request = CodeRunRequest::new("p").binding(tools(&calls)).approvals(approvals);
        let result = run_with(Limits::default(), request, |mut script| async move {
            script.events.send(call(1, 0, json!("a"))).unwrap();
            assert_eq!(answered(&mut script).await, (1, Ok(json!({ "did": "a" }))));
            script.events.send(call(2, 1, json!({ "name": "infra" }))).unwrap();
            assert_eq!(answered(&mut script).await, (2, Err("denied: not on Fridays".into())));
            script.events.send(call(3, 2, json!({ "force": false }))).unwrap();
            assert_eq!(answered(&mut script).await.0, 3);
            script.events.send(call(4, 2, json!({ "force": true }))).unwrap();
            assert_eq!(answered(&mut script).await, (4, Ok(json!({ "did": { "force": true } }))));
            script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        })
        .await;
        assert!(result.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 3, "the denied call never reached the host");
        assert_eq!(
            *asked.lock().unwrap(),
            [
                (2, r#"tools.delete({"name":"infra"})"#.to_owned()),
                (4, r#"tools.write({"force":true})"#.to_owned())
            ]
        );
    });
}

#[test]
fn without_approvals_a_marked_call_is_denied_and_a_run_without_a_key_cannot_pause() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let request = CodeRunRequest::new("p").binding(tools(&calls));
        run_with(Limits::default(), request, |mut script| async move {
            script.events.send(call(1, 1, JsonValue::Null)).unwrap();
            assert_eq!(answered(&mut script).await, (1, Err("denied: no approver".into())));
            script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        })
        .await;
        let request = CodeRunRequest::new("p")
            .binding(tools(&calls))
            .approvals(Approvals::new(Decision::Pause));
        run_with(Limits::default(), request, |mut script| async move {
            script.events.send(call(1, 1, JsonValue::Null)).unwrap();
            assert_eq!(
                answered(&mut script).await,
                (1, Err("denied: this run cannot pause".into()))
            );
            script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn the_wall_clock_stands_still_while_a_decision_is_pending_and_no_decision_denies() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let slow = approver_fn(|_request| async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Decision::Allow
        });
        let limits = Limits { max_wall_ms: 200, ..Limits::default() };
        let request =
            CodeRunRequest::new("p").binding(tools(&calls)).approvals(Approvals::new(slow));
        let result = run_with(limits, request, |mut script| async move {
            script.events.send(call(1, 1, JsonValue::Null)).unwrap();
            assert_eq!(answered(&mut script).await.1, Ok(json!({ "did": null })));
            script.events.send(Event::Ended(Ending::Completed(Some(json!(1))))).unwrap();
        })
        .await;
        assert!(result.is_ok(), "{result:?}");
        // The clock runs again once the decision came.
        let request = CodeRunRequest::new("p")
            .binding(tools(&calls))
            .approvals(Approvals::new(approver_fn(|_request| async { Decision::Allow })));
        let result = run_with(limits, request, |mut script| async move {
            script.events.send(call(1, 1, JsonValue::Null)).unwrap();
            assert_eq!(answered(&mut script).await.0, 1);
            tokio::time::sleep(Duration::from_millis(400)).await;
            drop(script);
        })
        .await;
        assert_eq!(result.error().unwrap().kind(), FailureKind::Timeout);
        let never = approver_fn(|_request| std::future::pending::<Decision>());
        let approvals = Approvals::new(never).timeout(Duration::from_millis(50));
        let request = CodeRunRequest::new("p").binding(tools(&calls)).approvals(approvals);
        run_with(Limits::default(), request, |mut script| async move {
            script.events.send(call(1, 1, JsonValue::Null)).unwrap();
            assert_eq!(answered(&mut script).await, (1, Err("denied: no decision".into())));
            script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        })
        .await;
    });
}

/// Plays the first run of the pause tests: a read (settled), a delete that pauses, and a
/// write(force) asked about at the same time, which is pending too.
async fn play_until_paused(mut script: Script) {
    // Printed before the stop, read by the teardown.
    script.state.late_logs.lock().unwrap().push("late".into());
    script.events.send(Event::Log("start".into())).unwrap();
    script.events.send(call(10, 0, json!("x"))).unwrap();
    assert_eq!(answered(&mut script).await, (10, Ok(json!({ "did": "x" }))));
    script.events.send(call(11, 2, json!({ "force": true }))).unwrap();
    script.events.send(call(12, 1, json!({ "name": "infra" }))).unwrap();
    until_stopped(&script).await;
}

/// Waits until the host stops the substrate (the script must live until then: a dropped one
/// is a substrate that died).
async fn until_stopped(script: &Script) {
    while !script.state.stopped.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn pausing() -> Approvals {
    Approvals::new(approver_fn(|request| {
        let delete = request.function == "delete";
        async move {
            if delete {
                Decision::Pause
            } else {
                // Still deciding when the other call pauses the run.
                std::future::pending().await
            }
        }
    }))
    .checkpoint_key(key())
}

async fn paused_run(calls: &Arc<AtomicUsize>) -> CodeRunResult {
    paused_run_seen(calls).await.0
}

async fn paused_run_seen(
    calls: &Arc<AtomicUsize>,
) -> (CodeRunResult, Option<Determinism>, Vec<f64>) {
    let request = CodeRunRequest::new("p").binding(tools(calls)).approvals(pausing());
    run_seen(Limits::default(), request, play_until_paused).await
}

#[test]
fn a_paused_run_carries_a_signed_checkpoint_and_resumes_exactly() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let (mut result, determinism, clocks) = paused_run_seen(&calls).await;
        let determinism = determinism.expect("a run that may pause is deterministic");
        assert_eq!(clocks.len(), 1, "the read's answer carried the clock");
        assert!(clocks[0] >= determinism.started_ms);
        assert!(!result.is_ok() && result.error().is_none());
        assert_eq!(result.logs(), ["start", "late"]);
        let paused = result.take_paused().expect("paused");
        let pending: Vec<_> =
            paused.pending.iter().map(|call| (call.id, call.function.as_str())).collect();
        assert_eq!(pending, [(2, "write"), (3, "delete")]);
        assert_eq!(paused.checkpoint.pending(), paused.pending);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Through its text, as a host keeps it.
        let checkpoint = code_runtime::Checkpoint::from_json(&paused.checkpoint.to_json()).unwrap();

        let request = CodeRunRequest::resuming(checkpoint, Decisions::new().allow(3).deny(2, "no"))
            .binding(tools(&calls))
            .approvals(Approvals::new(Decision::deny("unused")).checkpoint_key(key()));
        let (result, resumed, replayed) =
            run_seen(Limits::default(), request, |mut script| async move {
                assert_eq!(script.program, "p", "the checkpoint's program runs");
                script.events.send(call(1, 0, json!("x"))).unwrap();
                assert_eq!(answered(&mut script).await, (1, Ok(json!({ "did": "x" }))));
                script.events.send(call(2, 2, json!({ "force": true }))).unwrap();
                assert_eq!(answered(&mut script).await, (2, Err("denied: no".into())));
                script.events.send(call(3, 1, json!({ "name": "infra" }))).unwrap();
                assert_eq!(
                    answered(&mut script).await,
                    (3, Ok(json!({ "did": { "name": "infra" } })))
                );
                // Past the record, the run is live again: an unmarked read runs.
                script.events.send(call(4, 0, json!("y"))).unwrap();
                assert_eq!(answered(&mut script).await.0, 4);
                script.events.send(Event::Ended(Ending::Completed(Some(json!("done"))))).unwrap();
            })
            .await;
        assert_eq!(result.value(), Some(&json!("done")));
        assert_eq!(resumed, Some(determinism), "the same seed and clock origin");
        assert_eq!(replayed[0], clocks[0], "the recorded answer comes with its recorded clock");
        assert!(replayed[1..].iter().all(|clock| *clock >= clocks[0]));
        // The recorded read was answered from the checkpoint: only the delete and the new read ran.
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    });
}

#[test]
fn recorded_answers_come_back_in_their_first_order() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(tokio::sync::Notify::new());
        let slow = {
            let gate = gate.clone();
            binding(move |_args| {
                let gate = gate.clone();
                async move {
                    gate.notified().await;
                    Ok(json!("slow"))
                }
            })
        };
        let namespace = |slow: code_runtime::BindingFunction| tools(&calls).function("slow", slow);
        let request = CodeRunRequest::new("p")
            .binding(namespace(slow.clone()))
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key()));
        let mut result = run_with(Limits::default(), request, |mut script| {
            let gate = gate.clone();
            async move {
                script.events.send(call(1, 3, JsonValue::Null)).unwrap(); // slow, first made
                script.events.send(call(2, 0, json!("fast"))).unwrap(); // settles first
                assert_eq!(answered(&mut script).await.0, 2);
                gate.notify_one();
                assert_eq!(answered(&mut script).await.0, 1);
                script.events.send(call(3, 1, JsonValue::Null)).unwrap(); // pauses
                until_stopped(&script).await;
            }
        })
        .await;
        let checkpoint = result.take_paused().unwrap().checkpoint;
        let request = CodeRunRequest::resuming(checkpoint, Decisions::new().deny(3, "no"))
            .binding(namespace(slow))
            .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()));
        run_with(Limits::default(), request, |mut script| async move {
            script.events.send(call(1, 3, JsonValue::Null)).unwrap();
            // The slow call's answer waits for the fast one's, as the first time.
            assert!(
                tokio::time::timeout(Duration::from_millis(50), script.settled.recv())
                    .await
                    .is_err()
            );
            script.events.send(call(2, 0, json!("fast"))).unwrap();
            assert_eq!(answered(&mut script).await.0, 2);
            assert_eq!(answered(&mut script).await, (1, Ok(json!("slow"))));
            script.events.send(call(3, 1, JsonValue::Null)).unwrap();
            assert_eq!(answered(&mut script).await, (3, Err("denied: no".into())));
            script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        })
        .await;
    });
}

#[test]
fn a_program_that_takes_another_path_on_resume_ends_naming_the_call() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let checkpoint = paused_run(&calls).await.take_paused().unwrap().checkpoint;
        let request = CodeRunRequest::resuming(checkpoint, Decisions::new())
            .binding(tools(&calls))
            .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()));
        let result = run_with(Limits::default(), request, |script| async move {
            script.events.send(call(1, 0, json!("another input"))).unwrap();
            until_stopped(&script).await;
        })
        .await;
        assert_eq!(
            result,
            failed(
                &[],
                FailureKind::Exception,
                r#"the program took another path on resume: call 1 was tools.read("x"), now tools.read("another input")"#
            )
        );
    });
}

#[test]
fn a_forged_edited_or_foreign_checkpoint_is_refused_and_nothing_runs() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let checkpoint = paused_run(&calls).await.take_paused().unwrap().checkpoint;
        let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 8);
        let resume = |checkpoint: code_runtime::Checkpoint, key: CheckpointKey| {
            CodeRunRequest::resuming(checkpoint, Decisions::new())
                .binding(tools(&calls))
                .approvals(Approvals::new(Decision::Allow).checkpoint_key(key))
        };
        let refused = |error: CheckpointError| Err(ContractError::Checkpoint(error));
        let text = checkpoint.to_json();
        let edited = text.replacen(r#""x""#, r#""y""#, 1);
        assert_ne!(edited, text);
        let edited = code_runtime::Checkpoint::from_json(&edited).unwrap();
        assert_eq!(runtime.run(resume(edited, key())).await, refused(CheckpointError::Forged));
        let other_key = CheckpointKey::new(vec![7; 32]).unwrap();
        assert_eq!(
            runtime.run(resume(checkpoint.clone(), other_key)).await,
            refused(CheckpointError::Forged)
        );
        let mut other_bindings = resume(checkpoint.clone(), key());
        other_bindings.bindings[0] = other_bindings.bindings[0]
            .clone()
            .function("extra", binding(|_| async { Ok(json!(1)) }));
        assert_eq!(runtime.run(other_bindings).await, refused(CheckpointError::OtherBindings));
        let mut other_program = resume(checkpoint.clone(), key());
        other_program.program = "q".into();
        assert_eq!(runtime.run(other_program).await, refused(CheckpointError::OtherProgram));
        let mut not_pending = resume(checkpoint.clone(), key());
        not_pending.resume.as_mut().unwrap().decisions = Decisions::new().allow(1);
        assert_eq!(runtime.run(not_pending).await, refused(CheckpointError::NotPending(1)));
        let mut no_key = resume(checkpoint.clone(), key());
        no_key.approvals = None;
        assert_eq!(runtime.run(no_key).await, refused(CheckpointError::NoKey));
        let (python, _) = FakeProvider::new("python", Limits::default(), 8);
        assert!(matches!(
            python.run(resume(checkpoint, key())).await,
            Err(ContractError::Checkpoint(CheckpointError::OtherLanguage { .. }))
        ));
        assert!(scripts.try_recv().is_err(), "nothing ran");
    });
}

#[test]
fn approvals_are_events_naming_who_decided() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let sink = EventSink::new(move |event| {
            let line = match event {
                RunEvent::ApprovalRequested { id, request } => {
                    format!("requested {id} {} call {}", request.summary, request.call)
                }
                RunEvent::ApprovalDecided { id, decision, by } => {
                    format!("decided {id} {} by {by}", decision.as_str())
                }
                RunEvent::End { kind } => format!("end {kind:?}"),
                _ => return,
            };
            seen.lock().unwrap().push(line);
        });
        let request = CodeRunRequest::new("p")
            .binding(tools(&calls))
            .approvals(Approvals::new(Decision::Allow))
            .events(sink);
        run_with(Limits::default(), request, |mut script| async move {
            script.events.send(call(5, 1, json!(1))).unwrap();
            assert_eq!(answered(&mut script).await.0, 5);
            script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        })
        .await;
        assert_eq!(
            *events.lock().unwrap(),
            ["requested 5 tools.delete(1) call 1", "decided 5 allow by policy", "end None"]
        );
    });
}

#[test]
fn an_approver_that_panics_denies_the_call_and_the_host_lives_on() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let approvals = Approvals::new(approver_fn(|_request| async {
            panic!("the approver's own bug");
        }));
        let request = CodeRunRequest::new("p").binding(tools(&calls)).approvals(approvals);
        let result = run_with(Limits::default(), request, |mut script| async move {
            script.events.send(call(1, 1, JsonValue::Null)).unwrap();
            assert_eq!(answered(&mut script).await, (1, Err("denied: the approver failed".into())));
            script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        })
        .await;
        assert!(result.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn a_substrate_that_answers_recorded_calls_itself_is_checked_not_answered() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let checkpoint = paused_run(&calls).await.take_paused().unwrap().checkpoint;
        let resume = || {
            // Resumed three times over: a store that forgets lets it.
            let forgetting = Arc::new(Forgetting(Ok(true)));
            CodeRunRequest::resuming(checkpoint.clone(), Decisions::new().allow(3).deny(2, "no"))
                .binding(tools(&calls))
                .approvals(
                    Approvals::new(Decision::Allow)
                        .checkpoint_key(key())
                        .spent_checkpoints(forgetting),
                )
        };
        let replayed = |id: u64, function: u32, args: JsonValue| Event::Replayed {
            id,
            function: FunctionId::new(function),
            args: BindingArgs::new(args),
        };
        let result = run_with(Limits::default(), resume(), |mut script| async move {
            // The record answers call 1 (the read); calls 2 and 3 waited for decisions.
            assert_eq!(script.replay.len(), 3);
            let recorded = script.replay[0].clone().expect("call 1 is recorded");
            assert_eq!((recorded.function.index(), recorded.rank), (0, 0));
            assert_eq!(recorded.answer.outcome, Ok(json!({ "did": "x" })));
            assert!(script.replay[1..].iter().all(Option::is_none));
            script.events.send(replayed(1, 0, json!("x"))).unwrap();
            script.events.send(call(2, 2, json!({ "force": true }))).unwrap();
            // The host answers only the call it owns.
            assert_eq!(answered(&mut script).await, (2, Err("denied: no".into())));
            script.events.send(Event::Ended(Ending::Completed(Some(json!(1))))).unwrap();
        })
        .await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the read was not made again");
        // A call the substrate answered whose argument differs from the record's ends the run.
        let result = run_with(Limits::default(), resume(), |script| async move {
            script.events.send(replayed(1, 0, json!("y"))).unwrap();
            until_stopped(&script).await;
        })
        .await;
        assert_eq!(result.error().map(|error| error.kind()), Some(FailureKind::Exception));
        // So does one the record does not answer (call 2 waited for a decision).
        let result = run_with(Limits::default(), resume(), |script| async move {
            script.events.send(replayed(1, 0, json!("x"))).unwrap();
            script.events.send(replayed(2, 2, json!({ "force": true }))).unwrap();
            until_stopped(&script).await;
        })
        .await;
        assert_eq!(
            result.error().map(|error| error.message()),
            Some(r#"the program took another path on resume: call 2 was not answered, now tools.write({"force":true})"#)
        );
    });
}

#[test]
fn approvals_on_the_provider_serve_requests_that_bring_none() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 8);
        let guarded = code_runtime::WithApprovals::new(
            runtime,
            Approvals::new(Decision::deny("the provider's rule")),
        );
        assert_eq!(guarded.language(), "typescript");
        for (approvals, expected) in [
            (None, "denied: the provider's rule"),
            (
                Some(Approvals::new(Decision::deny("the request's rule"))),
                "denied: the request's rule",
            ),
        ] {
            let mut request = CodeRunRequest::new("p").binding(tools(&calls));
            request.approvals = approvals;
            let run = guarded.run(request);
            let play = async {
                let mut script = scripts.recv().await.unwrap();
                script.events.send(call(1, 1, JsonValue::Null)).unwrap();
                assert_eq!(answered(&mut script).await, (1, Err(expected.into())));
                script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
            };
            let (result, ()) = futures::join!(run, play);
            assert!(result.unwrap().is_ok());
        }
    });
}

/// Every way the decision "does this call need approval?" can fail to finish ends as "it
/// does": a `pattern` that gives up (backtracking limit) wherever it sits in the rule, under
/// `not`, `anyOf` or on property names, and an argument too deep to check. Only a definite
/// mismatch runs the call unasked.
#[test]
fn a_decision_that_cannot_finish_asks_and_only_a_definite_mismatch_does_not() {
    // "Ask unless the command is a dry run": the look-ahead needs the backtracking engine, which
    // gives up on a long string.
    let no_dry_run = json!({ "pattern": "^(?:(?!--dry-run).)*$" });
    let rules = [
        json!({ "properties": { "cmd": no_dry_run.clone() }, "required": ["cmd"] }),
        json!({ "not": { "not": { "properties": { "cmd": no_dry_run.clone() } } } }),
        json!({ "anyOf": [{ "properties": { "cmd": no_dry_run.clone() } }, { "required": ["never"] }] }),
        json!({ "propertyNames": no_dry_run.clone() }),
    ];
    let long = "a".repeat(2 << 20);
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    tokio().block_on(async {
        for (index, rule) in rules.into_iter().enumerate() {
            let calls = Arc::new(AtomicUsize::new(0));
            let asked = Arc::new(AtomicUsize::new(0));
            let counted = asked.clone();
            let approvals = Approvals::new(approver_fn(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Decision::deny("no") }
            }));
            let seen = calls.clone();
            let guarded = binding(move |_| {
                seen.fetch_add(1, Ordering::SeqCst);
                async { Ok(json!("ran")) }
            })
            .approval(ApprovalRule::When(rule.clone()));
            let namespace = CodeBindingNamespace::new("tools").function("shell", guarded);
            let request = CodeRunRequest::new("p").binding(namespace).approvals(approvals);
            let (long, deep) = (long.clone(), deep.clone());
            run_with(Limits::default(), request, |mut script| async move {
                let key_or_value = if index == 3 {
                    json!({ long.clone(): 1 })
                } else {
                    json!({ "cmd": long.clone() })
                };
                script.events.send(call(1, 0, key_or_value)).unwrap();
                assert_eq!(
                    answered(&mut script).await,
                    (1, Err("denied: no".into())),
                    "rule {index}"
                );
                script.events.send(call(2, 0, json!({ "cmd": deep }))).unwrap();
                assert_eq!(
                    answered(&mut script).await,
                    (2, Err("denied: no".into())),
                    "rule {index}"
                );
                // A definite mismatch: a short dry run (rule 1's double negation matches it,
                // so it is asked there too).
                let dry = if index == 3 {
                    json!({ "ls --dry-run": 1 })
                } else {
                    json!({ "cmd": "ls --dry-run" })
                };
                script.events.send(call(3, 0, dry)).unwrap();
                assert_eq!(answered(&mut script).await, (3, Ok(json!("ran"))), "rule {index}");
                script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
            })
            .await;
            assert_eq!(asked.load(Ordering::SeqCst), 2, "rule {index}");
            assert_eq!(calls.load(Ordering::SeqCst), 1, "rule {index}");
        }
    });
}

/// A store of resumed checkpoints that answers the same whatever it is asked.
struct Forgetting(Result<bool, String>);

impl code_runtime::SpentCheckpoints for Forgetting {
    fn spend(&self, _signature: &str) -> Result<bool, String> {
        self.0.clone()
    }
}

/// A checkpoint's decisions are usable once: a replayed resume (the same decisions or others)
/// is refused before anything runs, as is one the store cannot vouch for; a resume refused for
/// a mistake (a decision on a call that is not pending) leaves the checkpoint usable.
#[test]
fn a_checkpoint_is_resumed_once_and_a_replay_runs_nothing() {
    tokio().block_on(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let checkpoint = paused_run(&calls).await.take_paused().unwrap().checkpoint;
        let made = calls.load(Ordering::SeqCst);
        let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 8);
        let resume = |decisions: Decisions| {
            CodeRunRequest::resuming(checkpoint.clone(), decisions)
                .binding(tools(&calls))
                .approvals(Approvals::new(Decision::Allow).checkpoint_key(key()))
        };
        let refused = runtime.run(resume(Decisions::new().allow(99))).await.unwrap_err();
        assert!(matches!(refused, ContractError::Checkpoint(CheckpointError::NotPending(99))));
        let broken = resume(Decisions::new().allow(3))
            .approvals(
                Approvals::new(Decision::Allow)
                    .checkpoint_key(key())
                    .spent_checkpoints(Arc::new(Forgetting(Err("the store is down".into())))),
            );
        let refused = runtime.run(broken).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            "code-runtime: cannot resume: cannot tell whether the checkpoint was resumed already: the store is down"
        );
        let first = tokio::spawn({
            let request = resume(Decisions::new().allow(3).deny(2, "no"));
            let runtime = runtime.clone();
            async move { runtime.run(request).await }
        });
        let mut script = scripts.recv().await.unwrap();
        script.events.send(Event::Replayed {
            id: 1,
            function: FunctionId::new(0),
            args: BindingArgs::new(json!("x")),
        })
        .unwrap();
        script.events.send(call(2, 2, json!({ "force": true }))).unwrap();
        assert_eq!(answered(&mut script).await, (2, Err("denied: no".into())));
        script.events.send(Event::Ended(Ending::Completed(Some(json!(1))))).unwrap();
        assert!(first.await.unwrap().unwrap().is_ok());
        for decisions in [Decisions::new().allow(3).deny(2, "no"), Decisions::new().allow(2).allow(3)] {
            let replayed = runtime.run(resume(decisions)).await.unwrap_err();
            assert!(
                matches!(replayed, ContractError::Checkpoint(CheckpointError::Resumed)),
                "{replayed}"
            );
            assert!(replayed.to_string().contains("usable once"), "{replayed}");
        }
        assert!(scripts.try_recv().is_err(), "no replay reached a substrate");
        assert_eq!(calls.load(Ordering::SeqCst), made, "no call was made again");
    });
}

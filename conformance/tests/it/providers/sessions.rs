//! Sessions (docs/sessions.md): what a run leaves carries to the next run in its session as data,
//! each run in a fresh cell, on every provider that carries sessions; a provider that does not
//! refuses a run in a session clearly.

use std::time::Duration;

use code_runtime::{
    CheckpointKey, CodeRunRequest, CodeRunResult, CodeRuntime, ContractError,
    DirectorySessionStore, Limits, Restored, RunLimits, SessionId, SessionReport, Sessions,
    binding, json,
};

use super::{Language, Provider, each_provider, failure, run_on, tokio, tools, value};

/// Runs `check` against every provider that carries sessions.
fn each_session_provider(check: impl Fn(&Provider)) {
    each_provider(|provider| {
        if provider.language == Language::Python {
            check(provider);
        }
    });
}

fn in_session(runtime: &dyn CodeRuntime, id: &SessionId, program: &str) -> CodeRunResult {
    run_on(runtime, CodeRunRequest::new(program).session(id.clone()))
}

#[track_caller]
fn report(result: &CodeRunResult) -> &SessionReport {
    result.session().unwrap_or_else(|| panic!("no session report: {}", result.to_json()))
}

fn kept(result: &CodeRunResult) -> Vec<(String, String)> {
    report(result).kept.iter().map(|kept| (kept.name.clone(), kept.type_name.clone())).collect()
}

fn dropped(result: &CodeRunResult) -> Vec<(String, String)> {
    report(result).dropped.iter().map(|d| (d.name.clone(), d.why.clone())).collect()
}

fn unique(name: &str) -> SessionId {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    SessionId::new(format!("{name}-{n}"))
}

#[test]
fn values_functions_classes_and_imports_carry_to_the_next_run() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let id = unique("carry");
        let first = in_session(
            runtime,
            &id,
            "import math\nx = 41\ndef inc(v):\n    return v + 1\n\nclass P:\n    def __init__(self, n):\n        self.n = n\n\np = P(2)\nreturn x",
        );
        assert_eq!(value(&first), &json!(41), "{provider}");
        let session = report(&first);
        assert_eq!((session.run, session.restored), (1, Restored::New));
        let names = kept(&first);
        for expected in
            [("math", "import"), ("inc", "function"), ("P", "class"), ("x", "int"), ("p", "P")]
        {
            assert!(
                names.contains(&(expected.0.into(), expected.1.into())),
                "{expected:?} {names:?}"
            );
        }
        let second =
            in_session(runtime, &id, "return [inc(x), p.n, math.floor(2.5), type(p).__name__]");
        assert_eq!(value(&second), &json!([42, 2, 2, "P"]), "{provider}");
        assert_eq!((report(&second).run, report(&second).restored), (2, Restored::Continued));
        // A run in no session sees none of it.
        let plain = provider.run(CodeRunRequest::new("return 'x' in globals()"));
        assert_eq!(value(&plain), &json!(false));
    });
}

#[test]
fn what_cannot_carry_is_dropped_with_its_reason() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let id = unique("dropped");
        let result = in_session(
            runtime,
            &id,
            "import io\nf = io.BytesIO(b'abc')\ng = (i for i in range(3))\nh = lambda: 1\nkept = 1",
        );
        assert!(result.is_ok(), "{}", result.to_json());
        let dropped = dropped(&result);
        let why = |name: &str| {
            dropped.iter().find(|(n, _)| n == name).map(|(_, why)| why.clone()).unwrap_or_default()
        };
        assert!(why("f").contains("open file"), "{dropped:?}");
        assert!(why("g").contains("generator"), "{dropped:?}");
        assert!(why("h").contains("function"), "{dropped:?}");
        assert!(kept(&result).contains(&("kept".into(), "int".into())));
        let next = in_session(runtime, &id, "return [kept, 'f' in globals()]");
        assert_eq!(value(&next), &json!([1, false]));
    });
}

#[test]
fn sessions_and_owners_never_see_each_other() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let mine = unique("shared-name").owned_by("client-a");
        let theirs = SessionId::new(mine.name()).owned_by("client-b");
        let other = unique("other").owned_by("client-a");
        assert!(in_session(runtime, &mine, "secret = 'a'").is_ok());
        for id in [&theirs, &other] {
            let result = in_session(runtime, id, "return 'secret' in globals()");
            assert_eq!(value(&result), &json!(false));
            assert_eq!(report(&result).restored, Restored::New);
        }
        assert_eq!(value(&in_session(runtime, &mine, "return secret")), &json!("a"));
    });
}

#[test]
fn a_state_over_the_byte_budget_keeps_the_previous_one() {
    each_session_provider(|provider| {
        let runtime = provider.with(Limits { max_session_bytes: 100_000, ..Limits::default() });
        let id = unique("budget");
        assert!(in_session(runtime.as_ref(), &id, "x = 1").is_ok());
        let over = in_session(runtime.as_ref(), &id, "big = b'x' * 200_000\ny = 2\nreturn 'ran'");
        assert_eq!(value(&over), &json!("ran"), "the run itself is not failed");
        assert!(
            dropped(&over).iter().any(|(n, why)| n == "big" && why.contains("maxSessionBytes"))
        );
        assert!(report(&over).unchanged.is_some());
        let after =
            in_session(runtime.as_ref(), &id, "return [x, 'big' in globals(), 'y' in globals()]");
        assert_eq!(value(&after), &json!([1, false, false]));
    });
}

#[test]
fn a_200_mb_value_is_refused_within_the_budget() {
    each_session_provider(|provider| {
        let runtime = provider.with(Limits { max_memory_mb: 1024, ..Limits::default() });
        let id = unique("huge");
        let result = in_session(
            runtime.as_ref(),
            &id,
            "small = 1\nhuge = bytearray(200 * 2**20)\nreturn len(huge)",
        );
        assert_eq!(value(&result), &json!(200 * 1024 * 1024));
        assert!(dropped(&result).iter().any(|(n, _)| n == "huge"), "{}", result.to_json());
        assert!(report(&result).bytes < 1024, "{:?}", report(&result));
    });
}

#[test]
fn ten_thousand_tiny_variables_carry_within_the_budget() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let id = unique("tiny");
        let made = in_session(
            runtime,
            &id,
            "exec('\\n'.join(f'v{i} = {i}' for i in range(10_000)), globals())\nreturn v9999",
        );
        assert_eq!(value(&made), &json!(9999));
        assert_eq!(report(&made).kept.len(), 10_000);
        let again = in_session(runtime, &id, "return v1234 + v9999");
        assert_eq!(value(&again), &json!(11233));
    });
}

#[test]
fn an_idle_session_expires_and_its_next_run_says_so() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let id = unique("idle");
        let limits = RunLimits { session_idle_ms: Some(300), ..RunLimits::default() };
        let first =
            run_on(runtime, CodeRunRequest::new("x = 1").session(id.clone()).limits(limits));
        assert_eq!(report(&first).expires_in_ms, 300);
        std::thread::sleep(Duration::from_millis(600));
        let next = in_session(runtime, &id, "return 'x' in globals()");
        assert_eq!(value(&next), &json!(false));
        assert_eq!(report(&next).restored, Restored::Expired);
        assert_eq!(report(&next).run, 1);
    });
}

#[test]
fn runs_in_one_session_take_turns() {
    each_session_provider(|provider| {
        let runtime = provider.with(Limits::default());
        let id = unique("turns");
        let pause = binding(|_| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(json!(null))
        });
        let program = "n = globals().get('n', 0)\nawait tools.pause({})\nn += 1\nreturn n";
        let request = || {
            CodeRunRequest::new(program)
                .binding(tools().function("pause", pause.clone()))
                .session(id.clone())
        };
        let (a, b) = tokio()
            .block_on(async { tokio::join!(runtime.run(request()), runtime.run(request())) });
        let mut seen = vec![value(&a.unwrap()).clone(), value(&b.unwrap()).clone()];
        seen.sort_by_key(|n| n.as_f64().map(|n| n as i64));
        assert_eq!(seen, [json!(1), json!(2)], "{provider}");
    });
}

#[test]
fn a_replica_continues_a_session_another_started() {
    each_session_provider(|provider| {
        let dir = tempdir("replicas");
        let key = CheckpointKey::new([3u8; 32]).unwrap();
        let store = |key: &CheckpointKey| {
            Sessions::new(DirectorySessionStore::open(&dir, key.clone()).unwrap())
        };
        let (one, two) = (provider.with(Limits::default()), provider.with(Limits::default()));
        let id = SessionId::new("shared");
        let request = |program: &str| CodeRunRequest::new(program).session(id.clone());
        let first = run_on(one.as_ref(), request("rows = [1, 2, 3]").sessions(store(&key)));
        assert!(first.is_ok(), "{}", first.to_json());
        let second = run_on(two.as_ref(), request("return sum(rows)").sessions(store(&key)));
        assert_eq!(value(&second), &json!(6));
        assert_eq!(report(&second).run, 2);
        // Another key, or a changed byte, is refused, and the run says why.
        let other = CheckpointKey::new([4u8; 32]).unwrap();
        let refused = run_on(two.as_ref(), request("return 1").sessions(store(&other)));
        let (kind, message) = failure(&refused).expect("refused");
        assert_eq!(kind, "worker-exit");
        assert!(message.contains("refused") && message.contains("signature"), "{message}");
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.extension().is_some_and(|e| e == "session"))
            .unwrap();
        let mut bytes = std::fs::read(&file).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x20;
        std::fs::write(&file, bytes).unwrap();
        let edited = run_on(one.as_ref(), request("return 1").sessions(store(&key)));
        assert!(
            failure(&edited).is_some_and(|(_, m)| m.contains("refused")),
            "{}",
            edited.to_json()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn an_exploding_pickle_costs_only_its_own_run() {
    each_session_provider(|provider| {
        let runtime = provider.with(Limits { max_memory_mb: 256, ..Limits::default() });
        let id = unique("bomb");
        let armed = in_session(
            runtime.as_ref(),
            &id,
            "class Bomb:\n    def __reduce__(self):\n        return (bytearray, (2**40,))\n\nb = Bomb()\nsafe = 1",
        );
        assert!(armed.is_ok(), "{}", armed.to_json());
        let next = in_session(runtime.as_ref(), &id, "return safe");
        assert_eq!(value(&next), &json!(1), "{}", next.to_json());
        assert!(dropped(&next).iter().any(|(n, why)| n == "b" && why.contains("MemoryError")));
        let plain = run_on(runtime.as_ref(), CodeRunRequest::new("return 2"));
        assert_eq!(value(&plain), &json!(2));
    });
}

#[test]
fn a_session_name_is_checked_and_a_provider_without_sessions_refuses() {
    each_provider(|provider| {
        let bad = CodeRunRequest::new("return 1").session(SessionId::new("a\u{0}b"));
        let refused = tokio().block_on(provider.runtime().run(bad)).unwrap_err();
        assert!(matches!(refused, ContractError::UnusableSession { .. }), "{refused}");
        if provider.language != Language::Python {
            let request = CodeRunRequest::new("return 1").session(SessionId::new("s"));
            let refused = tokio().block_on(provider.runtime().run(request)).unwrap_err();
            assert!(refused.to_string().contains("carry no sessions"), "{refused}");
        }
    });
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("conformance-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn guarded() -> code_runtime::CodeBindingNamespace {
    tools().function(
        "delete",
        binding(|_| async { Ok(json!(5)) }).approval(code_runtime::ApprovalRule::Always),
    )
}

fn pausing(key: &CheckpointKey) -> code_runtime::Approvals {
    code_runtime::Approvals::new(code_runtime::Decision::Pause).checkpoint_key(key.clone())
}

#[test]
fn a_paused_run_resumes_into_its_session_from_the_state_it_began_with() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let key = CheckpointKey::new([9u8; 32]).unwrap();
        let id = unique("resumed");
        assert!(in_session(runtime, &id, "base = 10").is_ok());
        let program = "r = await tools.delete({})\ntotal = base + r\nreturn total";
        let paused = run_on(
            runtime,
            CodeRunRequest::new(program)
                .binding(guarded())
                .session(id.clone())
                .approvals(pausing(&key)),
        );
        let mut paused = paused;
        let checkpoint = paused.take_paused().expect("paused").checkpoint;
        assert_eq!(checkpoint.session(), Some(id.name()));
        assert!(report(&paused).unchanged.as_deref().unwrap_or("").contains("paused"));
        // The resume names no session: it runs in the checkpoint's.
        let resumed = run_on(
            runtime,
            CodeRunRequest::resuming(checkpoint.clone(), code_runtime::Decisions::new().allow(1))
                .binding(guarded())
                .approvals(
                    code_runtime::Approvals::new(code_runtime::Decision::Allow)
                        .checkpoint_key(key.clone()),
                ),
        );
        assert_eq!(value(&resumed), &json!(15), "{}", resumed.to_json());
        assert_eq!(report(&resumed).restored, Restored::Continued);
        assert_eq!(value(&in_session(runtime, &id, "return total")), &json!(15));

        // Paused again, then the session moves on: the resume is refused.
        let paused = run_on(
            runtime,
            CodeRunRequest::new(program)
                .binding(guarded())
                .session(id.clone())
                .approvals(pausing(&key)),
        );
        let checkpoint = paused.paused().expect("paused").checkpoint.clone();
        assert!(in_session(runtime, &id, "base = 99").is_ok());
        let refused = tokio().block_on(
            runtime.run(
                CodeRunRequest::resuming(
                    checkpoint.clone(),
                    code_runtime::Decisions::new().allow(1),
                )
                .binding(guarded())
                .approvals(
                    code_runtime::Approvals::new(code_runtime::Decision::Allow)
                        .checkpoint_key(key.clone()),
                ),
            ),
        );
        let refused = refused.unwrap_err();
        assert!(refused.to_string().contains("has changed since the run paused"), "{refused}");
        // Nor may a resume name another session.
        let other = tokio().block_on(
            runtime.run(
                CodeRunRequest::resuming(checkpoint, code_runtime::Decisions::new().allow(1))
                    .binding(guarded())
                    .session(SessionId::new("elsewhere"))
                    .approvals(
                        code_runtime::Approvals::new(code_runtime::Decision::Allow)
                            .checkpoint_key(key),
                    ),
            ),
        );
        let other = other.unwrap_err().to_string();
        assert!(other.contains("was in session"), "{other}");
    });
}

#[test]
fn the_runs_own_names_win_over_the_sessions() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let id = unique("injected");
        assert!(in_session(runtime, &id, "x = 5\ntools = 'mine'").is_ok());
        let request = CodeRunRequest::new("return [x, type(tools).__name__]")
            .value("x", json!(7))
            .binding(tools().function("echo", binding(|args| async move { Ok(args.into()) })))
            .session(id.clone());
        let result = run_on(runtime, request);
        assert_eq!(value(&result), &json!([7, "_Namespace"]), "{}", result.to_json());
        let shadowed = dropped(&result);
        assert!(
            shadowed.iter().any(|(n, why)| n == "x" && why.contains("of its own")),
            "{shadowed:?}"
        );
    });
}

#[test]
fn definitions_carry_only_as_the_program_left_them() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let id = unique("definitions");
        // A form feed in a comment, an import sharing its line with a statement that must not
        // run again.
        let first = in_session(
            runtime,
            &id,
            "# a\u{c} b\ny = 1\ndef f():\n    return 1\nimport os; marker = 'ran'\ndef g():\n    return 2",
        );
        assert!(first.is_ok(), "{}", first.to_json());
        // A new definition that never ran, and a definition rebound to a value.
        let second =
            in_session(runtime, &id, "g = 5\nraise ValueError('before')\ndef f():\n    return 99");
        assert!(second.error().is_some());
        let third = in_session(runtime, &id, "return [f(), g, os.sep, marker, y]");
        assert_eq!(value(&third), &json!([1, 5, "/", "ran", 1]), "{}", third.to_json());
    });
}

#[test]
fn nonlocal_names_stay_the_programs_and_are_said_so() {
    each_session_provider(|provider| {
        let runtime = provider.runtime();
        let id = unique("nonlocal");
        let program = "count = 0\ndef bump():\n    nonlocal count\n    count += 1\nbump()\nbump()\n\
                       def outer():\n    x = 1\n    def inner():\n        nonlocal x\n        x += 1\n    inner()\n    return x\n\
                       x = 10\nlabel: str = 'kept'\nreturn [count, outer(), x]";
        let result = in_session(runtime, &id, program);
        assert_eq!(value(&result), &json!([2, 2, 10]), "{}", result.to_json());
        let lost = dropped(&result);
        assert!(lost.iter().any(|(n, why)| n == "count" && why.contains("nonlocal")), "{lost:?}");
        let next = in_session(runtime, &id, "return [x, label, outer()]");
        assert_eq!(value(&next), &json!([10, "kept", 2]), "{}", next.to_json());
    });
}

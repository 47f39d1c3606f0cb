//! Attacks on the host itself (issue "Step 3"): each one ends as a result of the documented kind,
//! the host stays alive and bounded, and the next run in the same process works, in both
//! isolation modes. Each test names the class it closes; the attacks are members of it.

use code_runtime::FailureKind;
use code_runtime::json;

use crate::*;

/// Runs `program` under `limits` in each isolation mode and checks that it failed as `kind`;
/// then that a plain run on the same runtime still works. Returns the message (the same in
/// both modes).
#[track_caller]
fn ends_as(limits: Limits, program: &str, kind: FailureKind) -> String {
    let mut messages = Vec::new();
    for runtime in both(limits) {
        let request = CodeRunRequest::new(program)
            .binding(tools().function("echo", echo()).function("never", never()));
        let result = run_on(&runtime, request);
        let mode = runtime.isolation();
        assert_eq!(
            result.error().map(|e| e.kind()),
            Some(kind),
            "{mode}: {program}: {}",
            result.to_json()
        );
        assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
        messages.push(result.error().map(|e| e.message().to_owned()).unwrap_or_default());
    }
    // A cell may die of a V8 fatal error where the in-process isolate stopped itself first.
    if kind != FailureKind::WorkerExit {
        assert_eq!(messages[0], messages[1], "{program}: the modes disagree");
    }
    messages.swap_remove(0)
}

/// A runtime under `limits` in each isolation mode: `thread`, then `process`.
fn both(limits: Limits) -> [WorkerThreadCodeRuntime; 2] {
    [runtime(limits), process_runtime(limits)]
}

fn small(max_output_bytes: u64) -> Limits {
    Limits { max_output_bytes, max_wall_ms: 20_000, ..Limits::default() }
}

#[test]
fn host_copies_are_bounded_by_the_output_budget() {
    // One string larger than the budget, the same string many times, an exponential DAG: the
    // host copies at most the budget's worth before the run ends.
    let big = "const s = 'x'.repeat(2 ** 24);";
    for program in [
        format!("{big} return Array(64).fill(s)"),
        format!("{big} console.log(...Array(64).fill(s))"),
        format!("{big} console.log(Array(64).fill(s))"),
        format!("{big} console.log({{ a: [[s, s], [s, s]] }})"),
        "let a: unknown[] = [1]; for (let i = 0; i < 40; i++) a = [a, a]; return a".to_owned(),
        format!("{big} throw new Error(s)"),
        format!("{big} throw s"),
        format!("{big} for (;;) console.log(s.slice(0, 1 << 20))"),
    ] {
        let before = rss_mib();
        ends_as(small(1 << 20), &program, FailureKind::OutputLimit);
        assert!(rss_mib() < before + 512, "{program}: the host grew by {} MiB", rss_mib() - before);
    }
}

#[test]
fn binding_arguments_and_pending_calls_are_bounded_by_the_memory_budget() {
    // The wall clock only bounds a test gone wrong: the walk of the DAG below is long on a
    // loaded machine, and it is the memory budget that must end it.
    let limits = Limits { max_memory_mb: 64, max_wall_ms: 120_000, ..Limits::default() };
    // An argument whose JSON is larger than the budget (a DAG unfolds exponentially): refused
    // as such, or the handles its walk holds fill the heap first.
    let runtime = runtime(limits);
    let request = CodeRunRequest::new(
        "let a: unknown[] = [1]; for (let i = 0; i < 40; i++) a = [a, a]; await tools.echo(a)",
    )
    .binding(tools().function("echo", echo()));
    let result = run_on(&runtime, request);
    let (kind, message) = failure(&result).unwrap_or_default();
    assert!(
        (kind == "exception" && message.contains("exceed the memory budget of 67108864 bytes"))
            || (kind == "worker-exit" && message.contains("out of memory")),
        "{}",
        result.to_json()
    );
    let request =
        CodeRunRequest::new("const s = 'x'.repeat(1 << 20); await tools.echo(Array(100).fill(s))")
            .binding(tools().function("echo", echo()));
    let message = failure(&run_on(&runtime, request)).unwrap_or_default().1;
    assert!(message.contains("exceed the memory budget of 67108864 bytes"), "{message}");
    // A flood of calls nobody awaits: each holds part of the budget until it settles.
    let message = ends_as(
        limits,
        "const s = 'x'.repeat(1 << 16); for (let i = 0; ; i++) { tools.never(s); if (i % 100 == 0) await new Promise((r) => setTimeout(r, 0)) }",
        FailureKind::Exception,
    );
    assert!(message.contains("too many binding calls in flight"), "{message}");
    // Without a turn of the event loop the rejections pile up in the heap instead.
    ends_as(
        limits,
        "const s = 'x'.repeat(1 << 16); for (;;) tools.never(s)",
        FailureKind::WorkerExit,
    );
    // Caught, the same flood is a loop the compute budget ends.
    let limits = Limits { compute_ms: 1_000, ..limits };
    ends_as(
        limits,
        "for (;;) { try { await Promise.race([tools.never(1), Promise.resolve()]) } catch {} }",
        FailureKind::Timeout,
    );
}

#[test]
fn deadlines_hold_while_a_throw_or_a_value_is_rendered() {
    let limits = Limits { compute_ms: 60_000, max_wall_ms: 1_000, ..Limits::default() };
    for program in [
        "const e = new Error('x'); Object.defineProperty(e, 'stack', { get() { for (;;) {} } }); throw e",
        "const e = new Error('x'); Object.defineProperty(e, 'stack', { value: undefined }); Object.defineProperty(e, 'message', { get() { for (;;) {} } }); throw e",
        "throw { toString() { for (;;) {} } }",
        "await null; throw { toString() { for (;;) {} } }",
        "setTimeout(() => { throw { toString() { for (;;) {} } } }, 0); await new Promise(() => {})",
        "return { get x() { for (;;) {} } }",
        "console.log({ get x() { for (;;) {} } })",
        "await tools.echo({ get x() { for (;;) {} } })",
    ] {
        let message = ends_as(limits, program, FailureKind::Timeout);
        assert_eq!(message, "wall-clock ceiling reached (1000ms)", "{program}");
    }
}

#[test]
fn deep_values_never_overflow_a_stack() {
    // A lossy value beside a deep one: what was built is dropped without recursion.
    ends_as(
        Limits::default(),
        "let d: unknown = 1; for (let i = 0; i < 150000; i++) d = [d]; return [d, undefined]",
        FailureKind::InvalidOutput,
    );
    // A deep argument of a call nobody awaits, and a deep one that crosses and comes back.
    let deep = "let d: unknown = 1; for (let i = 0; i < 300000; i++) d = [d];";
    for runtime in both(Limits::default()) {
        let request = CodeRunRequest::new(format!("{deep} void tools.never(d); return 1"))
            .binding(tools().function("never", never()));
        assert_eq!(value(&run_on(&runtime, request)), &json!(1));
        let request = CodeRunRequest::new(format!("{deep} await tools.echo(d); return 2"))
            .binding(tools().function("echo", echo()));
        let result = run_on(&runtime, request);
        assert!(
            result.is_ok() || result.error().is_some_and(|e| e.kind() == FailureKind::Exception),
            "{}: {}",
            runtime.isolation(),
            result.to_json()
        );
    }
}

#[test]
fn deeply_nested_program_text_is_an_exception_or_runs() {
    // The type stripper and V8's parser both recurse on nesting; one byte can be a level.
    for (open, close) in
        [("(", ")"), ("[", "]"), ("!", ""), ("-(", ")"), ("x => ", ""), ("a ? b : ", "")]
    {
        for depth in [5_000, 100_000] {
            let program = format!(
                "const a = 1, b = 2; return {}1{}",
                open.repeat(depth),
                close.repeat(depth)
            );
            let result = run(&program, vec![]);
            assert!(
                result.is_ok()
                    || result.error().is_some_and(|e| e.kind() == FailureKind::Exception),
                "{open} x {depth}: {}",
                result.to_json()
            );
        }
    }
    let huge = format!("return {}", "1+".repeat(600_000) + "1");
    let result = run(&huge, vec![]);
    assert_eq!(
        failure(&result),
        Some((
            "exception",
            "the program is 1200008 bytes long; at most 1048576 bytes are accepted".to_owned()
        ))
    );
}

#[test]
fn the_program_cannot_close_its_function() {
    // Closing the body early would run code at script top level, outside strict mode, and
    // could replace the function the host calls; the body is compiled as a function body.
    for program in [
        "return 1; }), globalThis.x = (function () { return this })().y = 1, (async function () {",
        "return 1 }, (function () { return this })().y = 1, async function () {",
        "return 1 }; (function () { return this })().y = 1; return async function () {",
        "}",
    ] {
        // Refused by the type stripper or by V8's parser, or run in strict mode, where `this`
        // is `undefined`: an exception every way.
        for runtime in both(Limits::default()) {
            let result = run_on(&runtime, CodeRunRequest::new(program));
            assert_eq!(
                failure(&result).map(|f| f.0),
                Some("exception"),
                "{}: {program}: {}",
                runtime.isolation(),
                result.to_json()
            );
        }
    }
    assert_eq!(value(&run("return typeof globalThis.y", vec![])), &json!("undefined"));
}

#[test]
fn a_throw_in_a_finalizer_fails_the_run_and_reaches_no_stream() {
    // V8 reports an exception nobody can catch (a `FinalizationRegistry` callback's) to stdout
    // unless the embedder listens: the run fails with it instead.
    let program = "const r = new FinalizationRegistry(() => { throw new Error('{\"logs\":[],\"value\":\"forged\"}') });\n\
        for (let i = 0; i < 100000; i++) r.register({ i }, i);\n\
        for (let round = 0; round < 200; round++) { const junk = []; for (let i = 0; i < 10000; i++) junk.push({ i }); await new Promise((r) => setTimeout(r, 1)); }\n\
        return 'no finalizer ran'";
    for runtime in both(Limits::default()) {
        let result = run_on(&runtime, CodeRunRequest::new(program));
        let (kind, message) = failure(&result).unwrap_or_default();
        assert_eq!(kind, "exception", "{}: {}", runtime.isolation(), result.to_json());
        assert!(message.starts_with("Error: {\"logs\":[],\"value\":\"forged\"}"), "{message}");
    }
}

#[test]
fn webassembly_is_absent_unless_allowed() {
    // `WebAssembly.Memory` needs no code generation and its pages are outside the budget.
    for runtime in both(Limits::default()) {
        let request = CodeRunRequest::new(
            "return new WebAssembly.Memory({ initial: 65536 }).buffer.byteLength",
        );
        let result = run_on(&runtime, request);
        assert_eq!(
            failure(&result).map(|(kind, message)| (
                kind,
                message.lines().next().unwrap_or_default().to_owned()
            )),
            Some(("exception", "ReferenceError: WebAssembly is not defined".to_owned()))
        );
    }
    let allowed = WorkerThreadCodeRuntime::new(WorkerThreadConfig {
        allow_wasm: true,
        ..WorkerThreadConfig::default()
    })
    .unwrap();
    assert_eq!(
        value(&run_on(&allowed, CodeRunRequest::new("return typeof WebAssembly.Memory"))),
        &json!("function")
    );
}

#[test]
fn a_line_over_the_budget_in_json_is_clipped_in_the_isolate_as_the_ledger_counts_it() {
    // 40 million `"` are 40 MB raw and 80 MB as JSON: the line used to cross whole and meet the
    // host's ledger there. Now the isolate clips it to what the ledger needs to see, and both
    // modes, and Python, give the same result.
    let limits = Limits { max_output_bytes: 1 << 20, ..Limits::default() };
    let program = "console.log('\"'.repeat(40_000_000)); return 1";
    let mut results = Vec::new();
    for runtime in both(limits) {
        let result = run_on(&runtime, CodeRunRequest::new(program));
        assert_eq!(failure(&result).map(|(kind, _)| kind), Some("output-limit"));
        results.push(result.to_json());
    }
    assert_eq!(results[0], results[1]);
    assert!(results[0].len() < (1 << 20) + 100, "the result fits the budget");
}

#[test]
fn deep_values_crossing_as_the_wall_clock_fires_do_not_reach_the_hosts_stack() {
    // A 150 000-deep value finishing its conversion as the wall clock fires, and an un-awaited
    // call with one: every partial value is dropped, in whatever thread, without recursion.
    let programs = [
        "let v: unknown = null; for (let i = 0; i < 150_000; i++) v = [v]; return v",
        "let v: unknown = null; for (let i = 0; i < 150_000; i++) v = [v]; tools.echo(v); tools.echo(v); return 1",
        "let v: unknown = null; for (let i = 0; i < 150_000; i++) v = { k: v }; await tools.echo(v); return v",
    ];
    for isolation_runtime in both(Limits::default()) {
        for program in programs {
            for wall in [5, 20, 40, 80, 160, 400, 5_000] {
                let request =
                    CodeRunRequest::new(program).binding(tools().function("echo", echo())).limits(
                        code_runtime::RunLimits { max_wall_ms: Some(wall), ..Default::default() },
                    );
                let result = run_on(&isolation_runtime, request);
                let kind = failure(&result).map(|(kind, _)| kind);
                assert!(
                    matches!(kind, None | Some("timeout")),
                    "{}: {program} at {wall} ms: {}",
                    isolation_runtime.isolation(),
                    result.to_json().chars().take(300).collect::<String>()
                );
            }
        }
        assert_eq!(value(&run_on(&isolation_runtime, CodeRunRequest::new("return 1"))), &json!(1));
    }
}

#[test]
fn answers_a_program_does_not_await_are_held_to_the_memory_budget() {
    // Each answer is 4 MB and nothing awaits them: in a cell they queue on the host until the
    // cell reads them; the host holds at most the memory budget of them.
    let limits = Limits { max_memory_mb: 64, max_wall_ms: 30_000, ..Limits::default() };
    let big = binding(|_| async move { Ok(json!("x".repeat(4 << 20))) });
    let program = "for (let i = 0; i < 200; i++) tools.big(); for (;;) {}";
    let runtime = process_runtime(limits);
    let request = CodeRunRequest::new(program).binding(tools().function("big", big));
    let result = run_on(&runtime, request);
    let (kind, message) = failure(&result).unwrap_or_default();
    assert_eq!(kind, "worker-exit", "{}", result.to_json());
    assert!(message.contains("memory budget"), "{message}");
}

#[test]
fn promise_all_over_five_times_the_pending_budget_runs_every_call() {
    // `max_pending_calls` (1 000 by default) bounds what the host runs at once, not what the
    // program may write: the calls past it wait their turn.
    let program = "const all = await Promise.all(Array.from({ length: 5000 }, (_, i) => tools.echo(i))); return [all.length, all[4999]]";
    for runtime in both(Limits::default()) {
        let request = CodeRunRequest::new(program).binding(tools().function("echo", echo()));
        assert_eq!(
            value(&run_on(&runtime, request)),
            &json!([5000, 4999]),
            "{}",
            runtime.isolation()
        );
    }
}

//! Hostile programs: escapes, prototype games, blocking, bombs and crowds.

use std::time::Duration;

use code_runtime::FailureKind;
use code_runtime::json;

use crate::*;

#[test]
fn no_host_objects_are_reachable() {
    let program = "const g = (this as any)?.constructor?.constructor ?? (() => globalThis);\nlet found: unknown;\ntry { found = Function('return this')() } catch (e) { found = String(e) }\nconst names = Object.getOwnPropertyNames(globalThis).filter(n => ['process', 'require', 'Deno', 'Buffer', 'fetch', 'module'].includes(n));\nreturn [typeof g, String(found).slice(0, 9), names];";
    assert_eq!(value(&run(program, vec![])), &json!(["function", "EvalError", []]));
}

#[test]
fn c088_the_bridge_survives_hostile_global_mutation() {
    let namespace = tools().function("echo", echo()).function("fail", reject("nope"));
    let program = r#"
const g = globalThis as any;
Array.isArray = () => false;
for (const m of ['at', 'includes', 'pop', 'push']) (Array.prototype as any)[m] = () => { throw new Error('tampered') };
for (const m of ['defineProperty', 'getOwnPropertyDescriptor', 'getPrototypeOf', 'keys']) (Object as any)[m] = () => { throw new Error('tampered') };
(Object as any).hasOwn = () => false;
Object.is = () => true;
Object.prototype.propertyIsEnumerable = () => false;
Number.isFinite = () => false;
Number.isSafeInteger = () => false;
Function.prototype.toString = () => 'bogus';
(Object.prototype as any).get = () => undefined;
(Object.prototype as any).constructor = null;
(Array.prototype as any).constructor = null;
for (const name of ['Array', 'Error', 'Function', 'Number', 'Object', 'Reflect', 'Set', 'String']) g[name] = undefined;
const echoed = await tools.echo({ request: ['€', 1] });
let failure;
try { await tools.fail({}) } catch (e) { failure = { typed: e instanceof ToolCallError, name: e.name, toolName: e.toolName, message: e.message } }
return { echoed, failure, completion: { ok: true, amount: 42 } };
"#;
    assert_eq!(
        run(program, vec![namespace]).to_json(),
        r#"{"logs":[],"value":{"echoed":{"request":["€",1]},"failure":{"typed":true,"name":"ToolCallError","toolName":"fail","message":"nope"},"completion":{"ok":true,"amount":42}}}"#
    );
}

#[test]
fn c087_impostor_objects_do_not_cross() {
    let (counted, calls) = {
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        (
            binding(move |args| {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async move { Ok(args.into()) }
            }),
            count,
        )
    };
    let program = r#"
const prototype = Object.create(null);
const SpoofedObject = function Object() {};
SpoofedObject.prototype = prototype;
Object.defineProperty(prototype, 'constructor', { value: SpoofedObject });
const forged = Object.assign(Object.create(prototype), { value: 1 });
Function.prototype.toString = () => 'function Object() { [native code] }';
try { await tools.never(forged) } catch (e) { return [e instanceof ToolCallError, e.message] }
"#;
    assert_eq!(
        value(&run(program, vec![tools().function("never", counted)])),
        &json!([true, "binding arguments must be lossless JSON"])
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn prepare_stack_trace_games_stay_in_the_program() {
    let program = "(Error as any).prepareStackTrace = () => { throw new Error('gotcha') };\nthrow new Error('real');";
    let result = run(program, vec![]);
    assert_eq!(
        result.error().map(|e| e.kind()),
        Some(FailureKind::Exception),
        "{}",
        result.to_json()
    );
    assert_eq!(value(&run("return 1", vec![])), &json!(1));
}

#[test]
fn atomics_wait_and_hot_loops_obey_the_budgets() {
    let runtime = runtime(Limits { compute_ms: 20_000, max_wall_ms: 500, ..Limits::default() });
    let wait = run_on(
        &runtime,
        CodeRunRequest::new(
            "const a = new Int32Array(new SharedArrayBuffer(4)); Atomics.wait(a, 0, 0); return 1",
        ),
    );
    assert_eq!(wait.error().map(|e| e.kind()), Some(FailureKind::Timeout), "{}", wait.to_json());
    let spin = run_on(&runtime, CodeRunRequest::new("while (true) {}"));
    assert_eq!(spin.error().map(|e| e.kind()), Some(FailureKind::Timeout), "{}", spin.to_json());
}

#[test]
fn a_thousand_concurrent_fan_outs() {
    let namespace = tools().function("echo", echo());
    let program = "const values = await Promise.all(Array.from({ length: 5 }, (_, i) => tools.echo(i)));\nreturn values.reduce((a, b) => a + b, 0);";
    let results = tokio().block_on(async {
        let runs = (0..1000).map(|_| {
            let request = CodeRunRequest::new(program).binding(namespace.clone());
            async move { default_runtime().run(request).await.unwrap() }
        });
        futures::future::join_all(runs).await
    });
    assert!(
        results.iter().all(|result| result.value() == Some(&json!(10))),
        "{:?}",
        results.iter().find(|r| !r.is_ok()).map(|r| r.to_json())
    );
    // Every isolate thread is gone (joined), whatever other tests are running.
    std::thread::sleep(Duration::from_millis(200));
    let isolates = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("code-runtime-v8") && !name.contains("launch"))
        .count();
    assert!(isolates < 50, "{isolates} isolate threads still alive");
}

/// A timer keeps its arguments' handles outside V8's heap until it fires: they are charged to
/// the run's memory as they are made, so a program cannot grow the host with waiting timers.
#[test]
fn waiting_timers_are_charged_to_the_run() {
    let program = "
        const big = Array(60000).fill(0);
        let refused = 0;
        for (let i = 0; i < 2000; i++) {
            try { setTimeout(() => {}, 1e9, ...big); }
            catch (e) { if (!(e instanceof RangeError)) throw e; refused++; }
        }
        return refused";
    let before = rss_mib();
    let limits = Limits { max_memory_mb: 64, ..Limits::default() };
    let result = run_on(&runtime(limits), CodeRunRequest::new(program));
    let refused = result
        .value()
        .and_then(JsonValue::as_u64)
        .unwrap_or_else(|| panic!("{:?}", result.to_json()));
    assert!(refused > 1900, "{refused} refused");
    let grown = rss_mib().saturating_sub(before);
    assert!(grown < 400, "the host grew by {grown} MiB");
}

/// `structuredClone` copies in the run's heap: 4 000 references to one 1 MiB string are 4 000
/// references in the copy (V8's serializer wrote the string out once per reference, 4 GiB of the
/// host's memory outside every limit), and a copy too large for the budget ends the run as out of
/// memory, not the host (the host's peak: `code-runtime-cli`'s hostile tests).
#[test]
fn structured_clone_copies_within_the_runs_memory() {
    let limits = Limits { max_memory_mb: 64, ..Limits::default() };
    let shared = "const big = 'x'.repeat(1 << 20); const copy = structuredClone(new Array(4000).fill(big)); return [copy.length, copy[3999].length]";
    let result = run_on(&runtime(limits), CodeRunRequest::new(shared));
    assert_eq!(result.value(), Some(&json!([4000, 1 << 20])), "{:?}", result.to_json());
    let bigints =
        "const b = 10n ** 100000n; return structuredClone(new Array(4000).fill(b)).length";
    let result = run_on(&runtime(limits), CodeRunRequest::new(bigints));
    assert_eq!(result.value(), Some(&json!(4000)), "{:?}", result.to_json());
    // Distinct values: the copy itself outgrows the budget.
    let distinct = "const values = Array.from({ length: 400 }, (_, i) => 'x'.repeat(100000) + i); const copies = []; for (;;) copies.push(structuredClone(values.map((v) => ({ v: v + '!' }))));";
    let result = run_on(&runtime(limits), CodeRunRequest::new(distinct));
    assert_eq!(
        result.error().map(|error| error.kind()),
        Some(FailureKind::WorkerExit),
        "{:?}",
        result.to_json()
    );
}

/// A builtin under way finishes its allocation after V8 terminates its program for memory (one
/// `split`, one spread, one `repeat` of hundreds of megabytes past a 64 MB budget): V8 meets an
/// allocation it cannot make with a fatal error that ends the process, the host's in `thread`
/// isolation. The host grants room to unwind (`memory.rs`), and abandons the isolate of a builtin
/// that needs more (`abandonment.rs`): each run ends as out of memory, five at once included, and
/// the host lives on.
#[test]
fn a_builtin_past_the_budget_ends_its_run_not_the_host() {
    let limits = Limits { max_memory_mb: 64, ..Limits::default() };
    let runtime = std::sync::Arc::new(runtime(limits));
    let programs: [&'static str; 5] = [
        "return 'a'.repeat(1e8).split('').length",
        "const a = new Array(3e7).fill(1); return [...a, ...a].length",
        "return new TextEncoder().encode('é'.repeat(1e8)).length",
        "return btoa('a'.repeat(1e8)).length",
        "const o = {}; for (let i = 0; i < 1e6; i++) o['k' + i] = i; let n = 0; for (let j = 0; j < 100; j++) n += Object.keys(o).length; return n",
    ];
    let runs: Vec<_> = programs
        .into_iter()
        .map(|program| {
            let runtime = runtime.clone();
            std::thread::spawn(move || run_on(&runtime, CodeRunRequest::new(program)))
        })
        .collect();
    for (program, run) in programs.iter().zip(runs) {
        let result = run.join().expect("the run's thread");
        let error = result.error().unwrap_or_else(|| panic!("{program}: {:?}", result.to_json()));
        assert_eq!(error.kind(), FailureKind::WorkerExit, "{program}: {:?}", result.to_json());
        assert!(error.message().contains("memory"), "{program}: {}", error.message());
    }
    let after = run_on(&runtime, CodeRunRequest::new("return 1 + 1"));
    assert_eq!(after.value(), Some(&json!(2)), "{:?}", after.to_json());
}

/// V8's internal size limits are fatal errors it gives no way back from (an array of 2^28
/// elements asked for by one `split` or `match`): in `thread` isolation the run ends as
/// `worker-exit` naming V8, its thread is abandoned (`abandonment.rs`), and the host runs on.
#[test]
fn a_fatal_error_of_v8_ends_the_run_not_the_host() {
    let runtime = runtime(Limits { max_memory_mb: 64, ..Limits::default() });
    for program in [
        "return 'x'.repeat(2 ** 28).split('').length",
        "return 'x'.repeat(2 ** 28).match(/x/g).length",
    ] {
        let result = run_on(&runtime, CodeRunRequest::new(program));
        let error = result.error().unwrap_or_else(|| panic!("{program}: {:?}", result.to_json()));
        assert_eq!(error.kind(), FailureKind::WorkerExit, "{program}: {:?}", result.to_json());
        assert!(error.message().starts_with("worker error: V8 fatal error"), "{}", error.message());
    }
    let after = run_on(&runtime, CodeRunRequest::new("return 1 + 1"));
    assert_eq!(after.value(), Some(&json!(2)), "{:?}", after.to_json());
}

/// No sequence of programs aborts the host in `thread` isolation, or makes it hold without bound:
/// twenty runs in a row end in a fatal error of V8, each abandoning its isolate with what it
/// holds (five such aborted the host before). Past the process's bound (`abandonment.rs`, 16
/// isolates) `thread` runs are refused with a clear error, and `process` isolation in the same
/// process runs on. Run in a process of its own (this test binary again, for this test alone),
/// since what is abandoned stays for the process's life.
#[test]
fn no_sequence_of_fatal_errors_aborts_the_host() {
    if !in_a_process_of_its_own("hostile::no_sequence_of_fatal_errors_aborts_the_host") {
        return;
    }
    let limits = Limits { max_memory_mb: 64, ..Limits::default() };
    let runtime = runtime(limits);
    let mut refused = 0;
    for _ in 0..20 {
        let program = "return 'x'.repeat(2 ** 28).split('').length";
        let result = run_on(&runtime, CodeRunRequest::new(program));
        let error = result.error().unwrap_or_else(|| panic!("{:?}", result.to_json()));
        assert_eq!(error.kind(), FailureKind::WorkerExit, "{:?}", result.to_json());
        if error.message().contains("thread isolation is out of service in this process") {
            refused += 1;
        } else {
            assert!(error.message().contains("V8 fatal error"), "{}", error.message());
        }
    }
    assert_eq!(refused, 4, "16 isolates abandoned, the rest refused");
    let after = run_on(&runtime, CodeRunRequest::new("return 1 + 1"));
    let refusal = after.error().map(|error| error.message().to_owned()).unwrap_or_default();
    assert!(refusal.contains("use process isolation, or restart the host"), "{refusal}");
    let cells = run_on(&process_runtime(limits), CodeRunRequest::new("return 1 + 1"));
    assert_eq!(cells.value(), Some(&json!(2)), "{:?}", cells.to_json());
}

/// V8's trap handler takes only V8's own breakpoint traps on a thread that runs a program
/// (`abandonment.rs`): any other `SIGTRAP` (here `raise`d, twice) goes to the handler the
/// process had before, and ours stays in place in front of it for the next V8 trap, which still
/// ends only its run. Run in a process of its own (this test binary again, for this test alone),
/// since it sets a signal's disposition for the process.
#[test]
fn other_traps_go_to_the_handler_that_was_there() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static TRAPS: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn counting(_signal: libc::c_int) {
        TRAPS.fetch_add(1, Ordering::SeqCst);
    }
    if !in_a_process_of_its_own("hostile::other_traps_go_to_the_handler_that_was_there") {
        return;
    }
    let disposition = || {
        // SAFETY: reads the disposition into a zeroed struct we own.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGTRAP, std::ptr::null(), &mut now);
            now.sa_sigaction
        }
    };
    let handler: extern "C" fn(libc::c_int) = counting;
    // SAFETY: a handler that only counts, for this process of the test's own.
    unsafe { libc::signal(libc::SIGTRAP, handler as libc::sighandler_t) };
    // The first isolate initialises V8, which puts our handler in front.
    let runtime = runtime(Limits { max_memory_mb: 64, ..Limits::default() });
    assert_eq!(run_on(&runtime, CodeRunRequest::new("return 1")).value(), Some(&json!(1)));
    let ours = disposition();
    assert_ne!(ours, handler as libc::sighandler_t, "V8's trap handler is in front");
    for _ in 0..2 {
        // SAFETY: raises a signal this process handles.
        unsafe { libc::raise(libc::SIGTRAP) };
    }
    assert_eq!(TRAPS.load(Ordering::SeqCst), 2, "both went to the handler that was there");
    assert_eq!(disposition(), ours, "and ours stays in front");
    let program = "return 'x'.repeat(2 ** 28).split('').length";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    let error = result.error().unwrap_or_else(|| panic!("{:?}", result.to_json()));
    assert!(error.message().starts_with("worker error: V8 fatal error"), "{}", error.message());
    assert_eq!(run_on(&runtime, CodeRunRequest::new("return 1 + 1")).value(), Some(&json!(2)));
    assert_eq!(TRAPS.load(Ordering::SeqCst), 2, "V8's own trap is not passed on");
}

/// `new URLSearchParams(text)` builds every pair inside one native call, where V8's heap limit
/// cannot stop it: two million pairs are refused as a `RangeError` up front, and the host lives.
#[test]
fn a_huge_query_string_is_refused_not_a_fatal_out_of_memory() {
    let program = "
        try { new URLSearchParams('a=1&'.repeat(2 << 20)); return 'built'; }
        catch (e) { return e instanceof RangeError ? 'refused' : String(e); }";
    let limits = Limits { max_memory_mb: 64, ..Limits::default() };
    let result = run_on(&runtime(limits), CodeRunRequest::new(program));
    assert_eq!(result.value(), Some(&json!("refused")), "{:?}", result.to_json());
    // A query string of a usual size parses as before.
    let small = "return [...new URLSearchParams('a=1&b=2&a=3').getAll('a')]";
    assert_eq!(
        run_on(&runtime(limits), CodeRunRequest::new(small)).value(),
        Some(&json!(["1", "3"]))
    );
}

/// swc's transforms take time that grows faster than the program: a long program that needs
/// compiling is refused with a clear error, and one under the bound that still takes long
/// stripping ends at the run's wall clock (starting a run is under it) or its compute budget
/// (the strip's CPU time is the run's), in both isolations.
#[test]
fn compiling_is_bounded_in_size_and_runs_under_the_wall_clock() {
    let block = "{enum E{A=1,B=A<<1}}\n";
    let long = format!("{}return 1", block.repeat((200 << 10) / block.len()));
    let result = run(&long, vec![]);
    let error = result.error().expect("refused");
    assert_eq!(error.kind(), FailureKind::Exception);
    assert!(error.message().contains("may be at most 131072 bytes"), "{}", error.message());
    // The same length erased (no enum) is fine.
    let erased = format!("{}return 1", "{const e={A:1,B:2}}\n".repeat((200 << 10) / 21));
    assert_eq!(run(&erased, vec![]).value(), Some(&json!(1)));
    // Under the bound, on a wall clock shorter than the strip takes in a debug build.
    let slow = format!("{}return 1", block.repeat((120 << 10) / block.len()));
    let limits = Limits { max_wall_ms: 50, ..Limits::default() };
    for runtime in [runtime(limits), process_runtime(limits)] {
        let result = run_on(&runtime, CodeRunRequest::new(&slow));
        // The strip takes most of a second in a debug build (tests are built so).
        assert_eq!(
            result.error().map(|error| error.kind()),
            Some(FailureKind::Timeout),
            "{:?}",
            result.to_json()
        );
    }
    // The strip's CPU time is the run's: under a compute budget it outspends, the run ends for
    // it (a wall clock long enough to finish the strip).
    let limits = Limits { max_wall_ms: 60_000, compute_ms: 20, ..Limits::default() };
    for runtime in [runtime(limits), process_runtime(limits)] {
        let result = run_on(&runtime, CodeRunRequest::new(&slow));
        let message = result.error().map(|error| error.message().to_owned()).unwrap_or_default();
        assert!(message.starts_with("compute budget exhausted"), "{:?}", result.to_json());
    }
}

/// Programs that must be compiled (here: an enum) and nest absurdly deep are refused with a clear
/// error before swc's transforms see them: one of them copies a subtree per level (a 300 000-deep
/// array took more than 20 GB of the host before the bound).
#[test]
fn a_deep_program_that_needs_compiling_is_refused_not_compiled() {
    for nested in [
        format!("{}{}", "[".repeat(300_000), "]".repeat(300_000)),
        format!("{}1{}", "(".repeat(300_000), ")".repeat(300_000)),
        format!("{}1", "!".repeat(300_000)),
        format!("{}1", "x => ".repeat(100_000)),
    ] {
        let result = run(&format!("enum E {{ A }}\nreturn {nested}"), vec![]);
        let error = result.error().expect("refused");
        assert_eq!(error.kind(), FailureKind::Exception);
        assert!(
            error.message().contains("nests more than 1000 levels deep"),
            "{}",
            error.message()
        );
    }
    // As deep as real programs go, it compiles.
    let program = format!("enum E {{ A = 2 }}\nreturn {}E.A{}", "[".repeat(100), "]".repeat(100));
    assert!(run(&program, vec![]).error().is_none());
}

/// Whether this is the process of its own that test `name` runs in: in the test binary's own
/// process, it runs this binary again for that test alone, checks that it passed, and answers
/// `false` (the test then returns). For tests that leave the process changed for good (isolates
/// abandoned, a signal's disposition set).
#[expect(clippy::disallowed_methods, reason = "this test binary, again, for one test alone")]
fn in_a_process_of_its_own(name: &str) -> bool {
    const ALONE: &str = "CODE_RUNTIME_TEST_ALONE";
    if std::env::var_os(ALONE).is_some_and(|alone| alone == name) {
        return true;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", name, "--test-threads", "1"])
        .env(ALONE, name)
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("1 passed"), "{stdout}");
    false
}

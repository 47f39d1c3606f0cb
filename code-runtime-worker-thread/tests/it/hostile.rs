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
/// stripping ends at the run's wall clock (starting a run is under it), in both isolations.
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

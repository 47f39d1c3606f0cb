//! The shared contract on Python: docs/reference.md §5.1, §5.4, §5.5, §5.8 and §5.14.

use code_runtime::json;

use crate::*;

#[test]
fn c001_descriptors() {
    // The names cross boundaries (results, reports, the Python package); the types compare
    // equal to them.
    let runtime = default_runtime();
    assert_eq!((runtime.language().as_str(), runtime.isolation().as_str()), ("python", "process"));
    assert!(runtime.language() == "python" && runtime.isolation() == "process");
}

#[test]
fn trivial_run_returns_its_value() {
    let result = run("return 1", vec![]);
    assert_eq!(result.to_json(), r#"{"logs":[],"value":1}"#);
}

#[test]
fn c036p_prints_and_stderr_in_order() {
    let program = "p = {\"x\": 1, \"y\": 2}\nprint(\"point\", p[\"x\"])\nimport sys; sys.stderr.write(\"careful\\n\")\nreturn p[\"x\"] + p[\"y\"]";
    let result = run(program, vec![]);
    assert_eq!(result.to_json(), r#"{"logs":["point 1","careful"],"value":3}"#);
}

#[test]
fn c037p_bridge_both_ways_and_typed_rejections() {
    let namespace = tools()
        .function("echo", binding(|args| async move { Ok(json!({ "echoed": args })) }))
        .function("fail", reject("nope"))
        .function("failRaw", reject("raw-nope"));
    let program = r#"
first = await tools.echo({"n": 1})
try:
    await tools.fail({})
except ToolCallError as e:
    caught = {"isTyped": True, "toolName": e.toolName, "message": str(e)}
try:
    await tools.failRaw({})
except ToolCallError as e:
    raw = {"toolName": e.toolName, "message": str(e)}
return {"first": first, "caught": caught, "raw": raw}
"#;
    let result = run(program, vec![namespace]);
    assert_eq!(
        value(&result),
        &json!({"first": {"echoed": {"n": 1}}, "caught": {"isTyped": true, "toolName": "fail", "message": "nope"}, "raw": {"toolName": "failRaw", "message": "raw-nope"}})
    );
}

#[test]
fn c002_failure_is_a_field() {
    let result = run("raise Exception(\"boom\")", vec![]);
    let error = result.error().expect("a failure");
    assert_eq!(error.kind(), code_runtime::FailureKind::Exception);
    assert!(error.message().ends_with("Exception: boom"), "{}", error.message());
    assert_eq!(result.value(), None);
}

#[test]
fn c003_pre_cancelled_starts_nothing() {
    let (probe, calls) = counted(json!(1));
    let signal = code_runtime::CancellationToken::new();
    signal.cancel();
    let request = CodeRunRequest::new("await tools.probe({})\nreturn 1")
        .binding(tools().function("probe", probe))
        .signal(signal);
    let result = run_on(default_runtime(), request);
    assert_eq!(result.to_json(), r#"{"logs":[],"error":{"kind":"abort","message":"cancelled"}}"#);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn c030_misuse_is_rejected_before_the_signal() {
    let signal = code_runtime::CancellationToken::new();
    signal.cancel();
    let request =
        CodeRunRequest::new("return 1").binding(CodeBindingNamespace::new("lambda")).signal(signal);
    let error = tokio().block_on(default_runtime().run(request)).unwrap_err();
    assert!(error.to_string().contains("not a usable identifier"), "{error}");
}

#[test]
fn c038_generic_error_class() {
    let helpers = CodeBindingNamespace::new("helpers")
        .function("fail", reject("nope"))
        .error_class("HelperCallError", "helperName");
    let program = "try:\n    await helpers.fail({})\nexcept HelperCallError as e:\n    return {\"helperName\": e.helperName, \"message\": str(e), \"isException\": isinstance(e, Exception)}";
    assert_eq!(
        value(&run(program, vec![helpers])),
        &json!({"helperName": "fail", "message": "nope", "isException": true})
    );
}

#[test]
fn c039_deep_values_through_argument_resolution_and_completion() {
    let program = "v = \"leaf\"\nfor _ in range(3000):\n    v = [v]\nreturn await tools.echo(v)";
    let result = run(program, vec![tools().function("echo", echo())]);
    let mut expected = json!("leaf");
    for _ in 0..3000 {
        expected = JsonValue::from(vec![expected]);
    }
    assert_eq!(code_runtime::json::encode(value(&result)), code_runtime::json::encode(&expected));
    drop(expected);
}

#[test]
fn c043_tracebacks_use_the_programs_own_lines() {
    let result =
        run("x = 1\n\ndef inner():\n    raise RuntimeError(\"kaboom\")\n\ninner()", vec![]);
    let message = result.error().expect("a failure").message();
    assert_eq!(
        message,
        "Traceback (most recent call last):\n  File \"<program>\", line 6, in <module>\n    inner()\n  File \"<program>\", line 4, in inner\n    raise RuntimeError(\"kaboom\")\nRuntimeError: kaboom"
    );
}

#[test]
fn syntax_errors_point_into_the_program() {
    let result = run("x = 1\ny = = 2", vec![]);
    let error = result.error().expect("a failure");
    assert_eq!(error.kind(), code_runtime::FailureKind::Exception);
    assert!(error.message().contains("File \"<program>\", line 2"), "{}", error.message());
    assert!(error.message().contains("SyntaxError"), "{}", error.message());
}

#[test]
fn binding_errors_show_no_bootstrap_frames() {
    let result = run("await tools.fail({})", vec![tools().function("fail", reject("denied"))]);
    let message = result.error().expect("a failure").message();
    assert_eq!(
        message,
        "Traceback (most recent call last):\n  File \"<program>\", line 1, in <module>\n    await tools.fail({})\nToolCallError: denied"
    );
}

#[test]
fn c044p_no_host_environment() {
    // Nothing of the host's: `HOME`, the run's own work directory, is the whole environment
    // (Python adds `LC_CTYPE` to its own copy).
    let program = "import os\nreturn [sorted(k for k in os.environ if k != \"LC_CTYPE\"), os.environ[\"HOME\"] == os.getcwd()]";
    assert_eq!(value(&run(program, vec![])), &json!([["HOME"], true]));
}

#[test]
fn c045_lossy_completion() {
    let result = run("return {\"f\": lambda: 1}", vec![]);
    assert_eq!(
        result.to_json(),
        r#"{"logs":[],"error":{"kind":"invalid-output","message":"program completion must be lossless JSON"}}"#
    );
}

#[test]
fn c046_no_completion_has_no_value_key() {
    assert_eq!(run("x = 1", vec![]).to_json(), r#"{"logs":[]}"#);
    assert_eq!(run("", vec![]).to_json(), r#"{"logs":[]}"#);
    assert_eq!(run("return None", vec![]).to_json(), r#"{"logs":[]}"#);
}

#[test]
fn c047_logs_before_a_raise_survive() {
    let result = run("print(\"before\")\nraise Exception(\"after-log\")", vec![]);
    assert_eq!(result.logs(), ["before"]);
    assert!(result.error().expect("a failure").message().ends_with("Exception: after-log"));
}

#[test]
fn c068_large_exact_container() {
    let result = run("return [7] * 50000", vec![]);
    assert_eq!(value(&result), &JsonValue::from(vec![json!(7); 50_000]));
}

#[test]
fn c085_lossy_resolution_rejects_the_call() {
    let bad = binding(|_| async { Ok(json!(9_007_199_254_740_993u64)) });
    let program = "try:\n    await tools.bad({})\nexcept ToolCallError as e:\n    return {\"toolName\": e.toolName, \"message\": str(e)}";
    assert_eq!(
        value(&run(program, vec![tools().function("bad", bad)])),
        &json!({"toolName": "bad", "message": "binding \"tools.bad\" resolved with a value that is not lossless JSON (integer 9007199254740993 is not exactly representable as a double)"})
    );
}

#[test]
fn c086_lossy_arguments_never_reach_the_host() {
    let (never_called, calls) = counted(json!(1));
    let program = r#"
import datetime
failures = []
for value in [datetime.date.today(), (1, 2), lambda: 1, {1: "a"}, float("nan"), -0.0, 2**53 + 1, "\ud800"]:
    try:
        await tools.never(value)
    except ToolCallError as e:
        failures.append([e.toolName, str(e)])
return failures
"#;
    let result = run(program, vec![tools().function("never", never_called)]);
    assert_eq!(
        value(&result),
        &JsonValue::from(vec![json!(["never", "binding arguments must be lossless JSON"]); 8])
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn c090_member_names_are_own_entries() {
    let namespace = tools()
        .function("__proto__", binding(|_| async { Ok(json!("proto-ok")) }))
        .function("constructor", binding(|_| async { Ok(json!("ctor-ok")) }))
        .function("my-tool", binding(|_| async { Ok(json!("dash-ok")) }));
    let program = "return [await tools[\"__proto__\"]({}), await tools[\"constructor\"]({}), await tools.__proto__({}), await tools[\"my-tool\"]({}), \"hasOwnProperty\" in dir(tools), hasattr(tools, \"missing\"), \"my-tool\" in tools]";
    assert_eq!(
        value(&run(program, vec![namespace])),
        &json!(["proto-ok", "ctor-ok", "proto-ok", "dash-ok", false, false, true])
    );
}

#[test]
fn c102_runs_are_isolated() {
    assert!(run("import builtins\nbuiltins.leak = 1\nreturn 1", vec![]).is_ok());
    assert_eq!(
        value(&run("import builtins\nreturn hasattr(builtins, \"leak\")", vec![])),
        &json!(false)
    );
}

#[test]
fn c176_integers_must_be_exact_doubles() {
    assert_eq!(
        run("return 2**53 + 1", vec![]).error().map(|e| e.kind()),
        Some(code_runtime::FailureKind::InvalidOutput)
    );
    assert_eq!(value(&run("return 2**53", vec![])), &json!(9_007_199_254_740_992u64));
    assert_eq!(value(&run("return 2**60", vec![])), &json!(1u64 << 60));
    assert_eq!(run("return 2**60", vec![]).to_json(), r#"{"logs":[],"value":1152921504606847000}"#);
    // And back: the host sends 2**60 with its exact digits, so Python sees the same int.
    assert_eq!(
        value(&run(
            "return (await tools.echo(2**60)) == 2**60",
            vec![tools().function("echo", echo())]
        )),
        &json!(true)
    );
}

#[test]
fn c177_floats() {
    for program in [
        "return -0.0",
        "return float(\"nan\")",
        "return float(\"inf\")",
        "return [1, {\"a\": -0.0}]",
    ] {
        assert_eq!(
            run(program, vec![]).error().map(|e| e.kind()),
            Some(code_runtime::FailureKind::InvalidOutput),
            "{program}"
        );
    }
    assert_eq!(value(&run("return 1.5", vec![])), &json!(1.5));
    assert_eq!(value(&run("return 2.0", vec![])), &json!(2));
}

#[test]
fn c178_only_json_shapes() {
    for program in [
        "return {1: \"a\"}",
        "return (1, 2)",
        "return {1, 2}",
        "return b\"x\"",
        "return object()",
        "x = []\nx.append(x)\nreturn x",
        "return \"\\ud800\"",
    ] {
        assert_eq!(
            run(program, vec![]).error().map(|e| e.kind()),
            Some(code_runtime::FailureKind::InvalidOutput),
            "{program}"
        );
    }
    // Shared (not cyclic) references are fine and duplicated.
    assert_eq!(value(&run("s = {\"v\": 1}\nreturn [s, s]", vec![])), &json!([{"v": 1}, {"v": 1}]));
}

#[test]
fn c184_only_the_bindings_are_seeded() {
    let program = "return sorted(k for k in globals() if not k.startswith(\"__\"))";
    assert_eq!(value(&run(program, vec![tools()])), &json!(["ToolCallError", "tools"]));
    let dunders = "return sorted(k for k in globals() if k.startswith(\"__\"))";
    assert_eq!(value(&run(dunders, vec![tools()])), &json!(["__builtins__", "__name__"]));
}

#[test]
fn asyncio_gather_fans_out() {
    let namespace = tools().function("slow", delayed(200, json!("ok")));
    let program = "import asyncio\nresults = await asyncio.gather(*[tools.slow({\"i\": i}) for i in range(20)])\nreturn len(results)";
    assert_eq!(value(&run(program, vec![namespace])), &json!(20));
}

#[test]
fn an_asyncio_program_ends_as_asyncio_run_ends_one() {
    // The bootstrap's loop (not `asyncio.run`'s runner): tasks still pending at the end are
    // cancelled and run their cleanup, async generators are closed, the default executor's
    // threads serve and are joined, the running loop is the current one, and a task that fails
    // as it is cancelled is reported on stderr, not lost.
    let program = r#"
import asyncio
async def background():
    try:
        await asyncio.sleep(10)
    finally:
        print("background cleaned up")
async def failing():
    try:
        await asyncio.sleep(10)
    finally:
        raise ValueError("boom")
async def numbers():
    try:
        yield 1
        yield 2
    finally:
        print("generator closed")
asyncio.create_task(background())
asyncio.create_task(failing())
generator = numbers()
first = await generator.__anext__()
doubled = await asyncio.to_thread(lambda: 2 * first)
await asyncio.sleep(0)
return [doubled, asyncio.get_event_loop() is asyncio.get_running_loop()]
"#;
    let result = run(program, vec![]);
    assert_eq!(value(&result), &json!([2, true]), "{result:?}");
    let logs = result.logs();
    for line in [
        "background cleaned up",
        "generator closed",
        "unhandled exception in a task cancelled as the program ended",
        "ValueError: boom",
    ] {
        assert!(logs.iter().any(|log| log.contains(line)), "{line:?} in {logs:?}");
    }
}

#[test]
fn several_calls_in_flight_without_asyncio() {
    let namespace = tools().function("echo", echo()).function("fail", reject("no"));
    let program = "a = tools.echo(1)\nb = tools.echo(2)\nc = tools.fail({})\ntry:\n    await c\nexcept ToolCallError as e:\n    f = str(e)\nreturn [await b, await a, f]";
    assert_eq!(value(&run(program, vec![namespace])), &json!([2, 1, "no"]));
}

#[test]
fn awaiting_something_else_without_asyncio_is_a_clear_exception() {
    let program = "class Odd:\n    def __await__(self):\n        yield 1\nawait Odd()";
    let message = run(program, vec![]).error().expect("a failure").message().to_owned();
    assert!(message.contains("import asyncio"), "{message}");
}

#[test]
fn unknown_member_is_an_attribute_error() {
    let message = run("await tools.missing({})", vec![tools()])
        .error()
        .expect("a failure")
        .message()
        .to_owned();
    assert!(message.ends_with("AttributeError: tools has no binding 'missing'"), "{message}");
}

#[test]
fn c031_c103_dispose_reaches_quiescence() {
    let runtime = std::sync::Arc::new(runtime(Limits::default()));
    let announced = Announced::default();
    let program = format!("{ANNOUNCE}while True:\n    pass");
    let request = CodeRunRequest::new(program).binding(announced.namespace());
    let result = tokio().block_on(async {
        let running = tokio::spawn({
            let runtime = runtime.clone();
            async move { runtime.run(request).await }
        });
        while announced.get().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let namespace = announced.get().unwrap();
        assert!(processes_in(namespace) >= 1, "the host sees the program");
        runtime.dispose().await;
        // Quiescence: the spinning program is gone by the time dispose returns.
        assert_eq!(processes_in(namespace), 0, "the program outlived dispose");
        running.await.unwrap().unwrap()
    });
    assert_eq!(failure(&result), Some(("abort", "runtime disposed".to_owned())));
    let error = tokio().block_on(runtime.run(CodeRunRequest::new("return 1"))).unwrap_err();
    assert!(error.to_string().contains("after disposal"), "{error}");
}

#[test]
fn invalid_configuration_is_refused_at_construction() {
    let missing = PythonCodeRuntime::new(PythonConfig {
        interpreter: "/nonexistent/python3".into(),
        ..PythonConfig::default()
    });
    let error = missing.unwrap_err();
    assert!(matches!(error, PythonError::Interpreter { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "code-runtime-python: the interpreter /nonexistent/python3 cannot run programs: cannot start it: No such file or directory (os error 2)"
    );
    let not_python = PythonCodeRuntime::new(PythonConfig {
        interpreter: "/bin/true".into(),
        ..PythonConfig::default()
    });
    assert!(matches!(not_python.unwrap_err(), PythonError::Interpreter { .. }));
    let frame = PythonCodeRuntime::new(PythonConfig {
        max_frame_bytes: Some(1024),
        ..PythonConfig::default()
    });
    assert_eq!(
        frame.unwrap_err().to_string(),
        "code-runtime: config.max_frame_bytes must be at least max_output_bytes + 65536, got 1024"
    );
    let limits = PythonCodeRuntime::new(PythonConfig {
        limits: Limits { compute_ms: 0, ..Limits::default() },
        ..PythonConfig::default()
    });
    assert!(
        limits.unwrap_err().to_string().contains("config.compute_ms must be a positive number")
    );
    let tiny_memory = PythonCodeRuntime::new(PythonConfig {
        limits: Limits { max_memory_mb: 1, ..Limits::default() },
        ..PythonConfig::default()
    });
    let error = tiny_memory.unwrap_err();
    assert!(error.to_string().contains("does not start in its sandbox cell"), "{error}");
    assert!(matches!(error, PythonError::Interpreter { .. }));
    let concurrency =
        PythonCodeRuntime::new(PythonConfig { max_concurrent_runs: 0, ..PythonConfig::default() });
    assert!(matches!(concurrency.unwrap_err(), PythonError::Config(_)));
}

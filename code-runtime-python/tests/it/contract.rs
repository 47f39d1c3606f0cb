//! The shared contract on Python: REFERENCE.md §5.1, §5.4, §5.5, §5.8 and §5.14.

use serde_json::json;

use crate::*;

#[test]
fn c001_descriptors() {
    assert_eq!(
        (default_runtime().language(), default_runtime().isolation()),
        ("python", "process")
    );
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

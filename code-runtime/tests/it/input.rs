//! Argument validation ([`BindingFunction::validate_input`]) through the scripted substrate: what
//! a mismatching call sees, that the closure never runs for it, which schemas are refused at the
//! start of a run, and that no argument makes a check unbounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use code_runtime::json;
use code_runtime::provider::{Ending, Event, FunctionId};
use code_runtime::{
    BindingArgs, BindingError, BindingFunction, CodeBindingNamespace, CodeRunRequest, CodeRuntime,
    ContractError, JsonValue, Limits, binding, describe,
};

use crate::fake::{FakeProvider, Script};

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// An echo that counts its calls.
fn counted(ran: &Arc<AtomicUsize>) -> BindingFunction {
    let ran = ran.clone();
    binding(move |args| {
        ran.fetch_add(1, Ordering::SeqCst);
        async move { Ok(args.into_value()) }
    })
}

fn search_schema() -> JsonValue {
    json!({
        "type": "object",
        "properties": {
            "q": { "type": "string", "minLength": 1 },
            "limit": { "type": "integer", "minimum": 1 },
            "filters": { "type": "array", "items": { "enum": ["news", "docs"] } }
        },
        "required": ["q"],
        "additionalProperties": false
    })
}

/// Runs a fake program on `namespace` that makes one call of function 0 per argument, and hands
/// back each call's outcome.
fn calls(
    limits: Limits,
    namespace: CodeBindingNamespace,
    arguments: Vec<JsonValue>,
) -> Vec<Result<JsonValue, BindingError>> {
    tokio().block_on(async {
        let (runtime, mut scripts) = FakeProvider::new("typescript", limits, 8);
        let run = tokio::spawn(async move {
            runtime.run(CodeRunRequest::new("p").binding(namespace)).await.unwrap()
        });
        let mut script: Script = scripts.recv().await.unwrap();
        let mut outcomes = Vec::new();
        for (id, args) in (1..).zip(arguments) {
            let call =
                Event::Call { id, function: FunctionId::new(0), args: BindingArgs::new(args) };
            script.events.send(call).unwrap();
            let (answered, outcome) = script.settled.recv().await.unwrap();
            assert_eq!(answered, id);
            outcomes.push(outcome);
        }
        script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        assert!(run.await.unwrap().is_ok(), "refused calls do not fail the run");
        outcomes
    })
}

#[track_caller]
fn mismatch(outcome: &Result<JsonValue, BindingError>, message: &str, path: &str, schema: &str) {
    let error = outcome.as_ref().expect_err("the argument does not match");
    assert_eq!(error.message(), message);
    assert_eq!(error.data(), Some(&json!({ "path": path, "schemaPath": schema })));
}

#[test]
fn a_mismatching_argument_rejects_naming_its_path_and_the_closure_never_runs() {
    let ran = Arc::new(AtomicUsize::new(0));
    let namespace = CodeBindingNamespace::new("tools")
        .function("search", counted(&ran).input(search_schema()).validate_input());
    let outcomes = calls(
        Limits::default(),
        namespace,
        vec![
            json!({ "q": "rust", "limit": 3, "filters": ["docs"] }),
            json!({ "q": "rust", "limit": "ten" }),
            json!({ "q": "rust", "filters": ["news", "blogs"] }),
            json!({ "limit": 3 }),
            json!({ "q": "rust", "page": 2 }),
            json!("rust"),
            JsonValue::Null,
        ],
    );
    assert_eq!(
        outcomes[0].as_ref().unwrap(),
        &json!({ "q": "rust", "limit": 3, "filters": ["docs"] })
    );
    let refused = r#"binding "tools.search" was not called: its argument"#;
    mismatch(
        &outcomes[1],
        &format!(
            r#"{refused} at /limit does not match its schema: "ten" is not of type "integer""#
        ),
        "/limit",
        "/properties/limit/type",
    );
    mismatch(
        &outcomes[2],
        &format!(
            r#"{refused} at /filters/1 does not match its schema: "blogs" is not one of "news" or "docs""#
        ),
        "/filters/1",
        "/properties/filters/items/enum",
    );
    mismatch(
        &outcomes[3],
        &format!(r#"{refused} does not match its schema: "q" is a required property"#),
        "",
        "/required",
    );
    let unknown = outcomes[4].as_ref().unwrap_err();
    assert!(unknown.message().contains("'page' was unexpected"), "{}", unknown.message());
    let bare = outcomes[5].as_ref().unwrap_err();
    assert!(bare.message().ends_with(r#""rust" is not of type "object""#), "{}", bare.message());
    let none = outcomes[6].as_ref().unwrap_err();
    assert!(none.message().ends_with(r#"null is not of type "object""#), "{}", none.message());
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the matching call reached the host");
}

#[test]
fn refused_calls_do_not_count_against_the_call_budget() {
    let ran = Arc::new(AtomicUsize::new(0));
    let namespace = CodeBindingNamespace::new("tools")
        .function("search", counted(&ran).input(search_schema()).validate_input());
    let limits = Limits { max_calls: 1, ..Limits::default() };
    let outcomes = calls(limits, namespace, vec![json!({}), json!({}), json!({ "q": "x" })]);
    assert!(outcomes[0].is_err() && outcomes[1].is_err());
    assert_eq!(outcomes[2].as_ref().unwrap(), &json!({ "q": "x" }));
}

#[test]
fn without_validate_input_the_schema_is_only_described() {
    let ran = Arc::new(AtomicUsize::new(0));
    // Not even a valid schema: unchecked functions never compile theirs.
    let namespace = CodeBindingNamespace::new("tools")
        .function("search", counted(&ran).input(json!({ "type": 5 })));
    let outcomes = calls(Limits::default(), namespace, vec![json!(42)]);
    assert_eq!(outcomes[0].as_ref().unwrap(), &json!(42));
    assert!(!counted(&ran).input(search_schema()).validates_input());
}

#[test]
fn an_unusable_input_schema_is_contract_misuse_when_the_run_starts() {
    let cases = [
        (
            counted(&Arc::default()).validate_input(),
            "it validates its input but has no input schema",
        ),
        (counted(&Arc::default()).input(json!({ "type": 5 })).validate_input(), ""),
        (counted(&Arc::default()).input(json!({ "minLength": -1 })).validate_input(), ""),
        // Never fetched or read: references outside the schema are refused.
        (
            counted(&Arc::default())
                .input(json!({ "$ref": "http://127.0.0.1:9/schema.json" }))
                .validate_input(),
            "",
        ),
        (
            counted(&Arc::default())
                .input(json!({ "$ref": "file:///etc/passwd" }))
                .validate_input(),
            "",
        ),
        (counted(&Arc::default()).input(json!({ "$ref": "#/$defs/missing" })).validate_input(), ""),
        (counted(&Arc::default()).input(crate::nested_arrays(200)).validate_input(), ""),
    ];
    for (function, why) in cases {
        let namespace = CodeBindingNamespace::new("tools").function("x", function);
        let error = tokio().block_on(async {
            let (runtime, _scripts) = FakeProvider::new("typescript", Limits::default(), 8);
            runtime.run(CodeRunRequest::new("p").binding(namespace.clone())).await.unwrap_err()
        });
        let ContractError::InvalidInputSchema { binding, why: said } = &error else {
            panic!("expected an unusable schema, got {error:?}");
        };
        assert_eq!(binding, "tools.x");
        if !why.is_empty() {
            assert_eq!(said, why);
        }
        assert!(said.len() < 400, "the reason is bounded: {said}");
        assert!(
            error
                .to_string()
                .starts_with(r#"code-runtime: binding "tools.x" has an unusable input schema: "#),
            "{error}"
        );
        // `describe` checks the same declarations.
        assert!(describe(std::slice::from_ref(&namespace), "typescript").is_err());
    }
    // `$ref` inside the schema, the draft named by `$schema`, and a recursive definition compile.
    let tree = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {
            "node": {
                "type": "object",
                "properties": { "children": { "type": "array", "items": { "$ref": "#/definitions/node" } } }
            }
        },
        "$ref": "#/definitions/node"
    });
    let namespace = CodeBindingNamespace::new("tools")
        .function("x", counted(&Arc::default()).input(tree).validate_input());
    let outcomes = calls(
        Limits::default(),
        namespace,
        vec![
            json!({ "children": [{ "children": [] }] }),
            json!({ "children": [{ "children": 1 }] }),
        ],
    );
    assert!(outcomes[0].is_ok());
    assert_eq!(outcomes[1].as_ref().unwrap_err().data().unwrap()["path"], "/children/0/children");
}

/// A tree of `depth` nodes, each `{"children": [next]}`, built without recursion.
fn deep_tree(depth: usize) -> JsonValue {
    // Built by moving, not with `json!`, which would copy (recursively) what it is given.
    let node = |children: Vec<JsonValue>| {
        JsonValue::Object(
            [("children".to_owned(), JsonValue::from(children))].into_iter().collect(),
        )
    };
    let mut value = node(Vec::new());
    for _ in 0..depth {
        value = node(vec![value]);
    }
    value
}

#[test]
fn no_argument_makes_a_check_unbounded() {
    let recursive = json!({
        "$defs": {
            "node": {
                "type": "object",
                "properties": { "children": { "type": "array", "items": { "$ref": "#/$defs/node" } } }
            }
        },
        "$ref": "#/$defs/node"
    });
    // Exponential for a backtracking engine without a step limit: nested quantifiers under a
    // look-ahead that cannot match.
    let backtracking = json!({ "type": "object", "properties": { "s": { "type": "string", "pattern": "^(?=(a|aa)+$)(a|a)+b$" } } });
    let integer = json!({ "type": "object", "properties": { "n": { "type": "integer" } } });
    let ran = Arc::new(AtomicUsize::new(0));
    let namespace = CodeBindingNamespace::new("tools")
        .function("tree", counted(&ran).input(recursive).validate_input())
        .function("text", counted(&ran).input(backtracking).validate_input())
        .function("number", counted(&ran).input(integer).validate_input());
    let huge = "x".repeat(16 << 20);
    let arguments = [
        (0, deep_tree(100_000)),
        (0, deep_tree(63)),
        (1, json!({ "s": format!("{}!", "a".repeat(40)) })),
        (2, json!({ "n": huge })),
    ];
    let outcomes = tokio().block_on(async {
        let (runtime, mut scripts) = FakeProvider::new("typescript", Limits::default(), 8);
        let run = tokio::spawn(async move {
            runtime.run(CodeRunRequest::new("p").binding(namespace)).await.unwrap()
        });
        let mut script: Script = scripts.recv().await.unwrap();
        let mut outcomes = Vec::new();
        for (id, (function, args)) in (1..).zip(arguments) {
            let call = Event::Call {
                id,
                function: FunctionId::new(function),
                args: BindingArgs::new(args),
            };
            script.events.send(call).unwrap();
            outcomes.push(script.settled.recv().await.unwrap().1);
        }
        script.events.send(Event::Ended(Ending::Completed(None))).unwrap();
        run.await.unwrap();
        outcomes
    });
    assert_eq!(
        outcomes[0].as_ref().unwrap_err().message(),
        r#"binding "tools.tree" was not called: its argument nests more than 128 levels deep, too deep to check against its schema"#
    );
    assert!(outcomes[1].is_ok(), "128 levels are checked: {:?}", outcomes[1]);
    let text = outcomes[2].as_ref().unwrap_err();
    assert!(
        text.message().starts_with(r#"binding "tools.text" was not called: its argument at /s"#),
        "{}",
        text.message()
    );
    let number = outcomes[3].as_ref().unwrap_err().message();
    assert!(
        number.len() < 600,
        "the message quotes a bounded part of the value: {} bytes",
        number.len()
    );
    assert!(number.starts_with(r#"binding "tools.number" was not called: its argument at /n does not match its schema: "xxx"#));
    assert!(number.ends_with('…'), "{number}");
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the 63-node tree reached the host");
}

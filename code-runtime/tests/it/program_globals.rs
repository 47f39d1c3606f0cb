//! The globals beside the namespaces: bare functions, `call_tool`, the request's values. Their
//! names obey the namespaces' rules, and `call_tool`'s index is unambiguous.

use code_runtime::json;
use code_runtime::provider::{
    FunctionId, ProgramGlobal, ProgramGlobals, ToolIndex, validate_request,
};
use code_runtime::{CodeBindingNamespace, CodeRunRequest, ContractError, binding};

fn namespace(global: &str, names: &[&str]) -> CodeBindingNamespace {
    names.iter().fold(CodeBindingNamespace::new(global), |namespace, name| {
        namespace.function(*name, binding(|args| async move { Ok(args.into_value()) }))
    })
}

#[track_caller]
fn rejected(request: CodeRunRequest) -> String {
    validate_request(&request).expect_err("the request must be rejected").to_string()
}

#[test]
fn bare_functions_take_names_nothing_else_has() {
    let bare = |global: &str, names: &[&str]| namespace(global, names).functions_as_globals();
    let ok = CodeRunRequest::new("").binding(bare("tools", &["search", "fetch"]));
    validate_request(&ok).expect("identifiers nothing else takes");
    let cases = [
        (
            vec![bare("tools", &["my-tool"])],
            "binding \"tools.my-tool\" cannot be a global: its name is not a usable identifier",
        ),
        (vec![bare("tools", &["class"])], "binding \"tools.class\" cannot be a global"),
        (
            vec![bare("tools", &["print"])],
            "binding global \"print\" would shadow a global the program needs",
        ),
        (vec![bare("tools", &["Promise"])], "binding global \"Promise\" would shadow"),
        (vec![bare("tools", &["console"])], "reserved binding global \"console\""),
        (vec![bare("tools", &["tools"])], "duplicate injected global \"tools\""),
        (vec![bare("a", &["x"]), bare("b", &["x"])], "duplicate injected global \"x\""),
        (vec![bare("a", &["b"]), namespace("b", &[])], "duplicate injected global \"b\""),
        (
            vec![bare("tools", &["ToolError"]).error_class("ToolError", "tool")],
            "duplicate injected global \"ToolError\"",
        ),
    ];
    for (namespaces, expected) in cases {
        let request = CodeRunRequest { bindings: namespaces, ..CodeRunRequest::default() };
        let message = rejected(request);
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
    }
    // Without the flag, any name is a member name.
    let members = CodeRunRequest::new("").binding(namespace("tools", &["my-tool", "print"]));
    validate_request(&members).expect("member names are unrestricted");
}

#[test]
fn call_tool_and_values_take_free_names() {
    let tools = || namespace("tools", &["search"]);
    let taken = CodeRunRequest::new("").binding(namespace("call_tool", &[])).call_tool();
    assert!(rejected(taken).contains("duplicate injected global \"call_tool\""));
    let bare = CodeRunRequest::new("")
        .binding(namespace("tools", &["call_tool"]).functions_as_globals())
        .call_tool();
    assert!(rejected(bare).contains("duplicate injected global \"call_tool\""));
    let cases = [
        ("account-id", json!(1), "value name \"account-id\" is not a usable identifier"),
        ("let", json!(1), "value name \"let\" is not a usable identifier"),
        ("console", json!(1), "reserved binding global \"console\""),
        ("JSON", json!(1), "binding global \"JSON\" would shadow"),
        ("len", json!(1), "binding global \"len\" would shadow"),
        ("tools", json!(1), "duplicate injected global \"tools\""),
        ("big", json!((1u64 << 53) + 1), "value \"big\" is unusable: it is not lossless JSON"),
    ];
    for (name, value, expected) in cases {
        let request = CodeRunRequest::new("").binding(tools()).value(name, value);
        let message = rejected(request);
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
    }
    let mut deep = json!(0);
    for _ in 0..300 {
        deep = json!([deep]);
    }
    let request = CodeRunRequest::new("").value("deep", deep);
    assert_eq!(
        validate_request(&request),
        Err(ContractError::UnusableValue {
            name: "deep".to_owned(),
            why: "it nests more than 256 levels deep".to_owned()
        })
    );
    let fine = CodeRunRequest::new("").binding(tools()).call_tool().value("accountId", json!("a"));
    validate_request(&fine).expect("free names");
}

#[test]
fn globals_are_planned_in_installation_order() {
    let namespaces = [namespace("a", &["x", "y"]), namespace("b", &["z"]).functions_as_globals()];
    let values = [("accountId".to_owned(), json!("acct"))];
    let planned = ProgramGlobals::plan(&namespaces, values, true);
    let described: Vec<String> =
        planned.installed.iter().map(|(name, global)| format!("{name}={global:?}")).collect();
    assert_eq!(
        described,
        ["z=Function(FunctionId(2))", "call_tool=CallTool", "accountId=Value(\"acct\")"]
    );
    assert!(planned.tools.is_some());
    let none = ProgramGlobals::plan(&namespaces, [], false);
    assert!(none.tools.is_none());
    assert!(matches!(
        none.installed.as_slice(),
        [(_, ProgramGlobal::Function(id))] if *id == FunctionId::new(2)
    ));
}

#[test]
fn call_tool_resolves_qualified_names_and_unambiguous_bare_ones() {
    let index = ToolIndex::new(&[
        namespace("weather", &["forecast", "alerts"]),
        namespace("geo", &["forecast", "lookup", "weather.alerts"]),
    ]);
    assert_eq!(index.find("weather.forecast"), Some(FunctionId::new(0)));
    assert_eq!(index.find("geo.forecast"), Some(FunctionId::new(2)));
    assert_eq!(index.find("lookup"), Some(FunctionId::new(3)));
    // Two namespaces have it: only the qualified names reach it.
    assert_eq!(index.find("forecast"), None);
    // A function named like another's qualified name does not take it over.
    assert_eq!(index.find("weather.alerts"), Some(FunctionId::new(1)));
    assert_eq!(index.find("geo.weather.alerts"), Some(FunctionId::new(4)));
    assert_eq!(index.find("alerts"), Some(FunctionId::new(1)));
    assert_eq!(index.find("nope"), None);
    assert_eq!(
        index.listing,
        "weather.forecast, weather.alerts, geo.forecast, geo.lookup, geo.weather.alerts"
    );
    let many: Vec<String> = (0..500).map(|n| format!("function_number_{n}")).collect();
    let names: Vec<&str> = many.iter().map(String::as_str).collect();
    let big = ToolIndex::new(&[namespace("tools", &names)]);
    assert!(big.listing.len() <= 1010 && big.listing.ends_with(", …"), "{}", big.listing.len());
    assert_eq!(big.find("function_number_499"), Some(FunctionId::new(499)));
}

//! Binding-declaration validation: docs/reference.md §5.1 constants and §5.2 misuse cases.

use code_runtime::provider::{
    PORTABLE_RESERVED_WORDS, PROGRAM_WRAPPER_NAME, RESERVED_BINDING_GLOBALS,
    RESERVED_ERROR_MEMBERS, SHADOWED_GLOBALS, is_dunder_member, validate_bindings,
};
use code_runtime::{CodeBindingNamespace, ContractError, binding};

/// The namespace the reference tests and the Code Mode consumer use, `T{}` in docs/reference.md §5.
fn tools() -> CodeBindingNamespace {
    CodeBindingNamespace::new("tools")
        .function("probe", binding(|args| async move { Ok(args.into_value()) }))
        .error_class("ToolCallError", "toolName")
}

#[track_caller]
fn check_rejected(namespaces: Vec<CodeBindingNamespace>, phrase: &str, expected: &str) {
    let error = validate_bindings(&namespaces).expect_err("declaration must be rejected");
    let message = error.to_string();
    assert!(message.contains(phrase), "{message:?} lacks {phrase:?}");
    assert_eq!(message, expected);
}

fn global(name: &str) -> Vec<CodeBindingNamespace> {
    vec![CodeBindingNamespace::new(name)]
}

fn error_class(name: &str, member: &str) -> Vec<CodeBindingNamespace> {
    vec![CodeBindingNamespace::new("tools").error_class(name, member)]
}

#[test]
fn c006_reserved_binding_globals() {
    for name in ["console", PROGRAM_WRAPPER_NAME, "__builtins__", "__name__", "__debug__"] {
        assert!(RESERVED_BINDING_GLOBALS.contains(&name), "{name}");
    }
    assert_eq!(PROGRAM_WRAPPER_NAME, "__code_runtime_main__");
    assert!(!RESERVED_BINDING_GLOBALS.contains(&"tools"));
    assert!(
        !RESERVED_BINDING_GLOBALS.contains(&"__dsh_main__"),
        "our own wrapper name, not the reference's"
    );
}

#[test]
fn c007_reserved_error_members() {
    for name in ["name", "message", "stack", "args", "with_traceback", "add_note", "data"] {
        assert!(RESERVED_ERROR_MEMBERS.contains(&name), "{name}");
    }
    assert!(!RESERVED_ERROR_MEMBERS.contains(&"code"));
}

#[test]
fn c008_dunder_member() {
    for name in ["__dict__", "__init__", "__x__", "_____", "__proto__"] {
        assert!(is_dunder_member(name), "{name} is a dunder");
    }
    for name in ["_private", "name", "__mid", "__", "____", "", "__\n__", "___"] {
        assert!(!is_dunder_member(name), "{name:?} is not a dunder");
    }
}

#[test]
fn c009_portable_reserved_words() {
    for word in ["function", "lambda", "nonlocal", "class", "await", "type", "_", "None", "eval"] {
        assert!(PORTABLE_RESERVED_WORDS.contains(&word), "{word}");
    }
    for word in ["tools", "undefined", "NaN", "globalThis", "print", "Object", "none"] {
        assert!(!PORTABLE_RESERVED_WORDS.contains(&word), "{word}");
    }
    let mut unique = PORTABLE_RESERVED_WORDS.to_vec();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 71, "71 distinct words");
}

#[test]
fn c010_global_with_space_is_not_usable() {
    check_rejected(
        global("not valid!"),
        "not a usable identifier",
        r#"code-runtime: binding global "not valid!" is not a usable identifier"#,
    );
}

#[test]
fn c011_global_await_is_not_usable() {
    check_rejected(
        global("await"),
        "not a usable identifier",
        r#"code-runtime: binding global "await" is not a usable identifier"#,
    );
}

#[test]
fn c012_global_dollar_tools_is_not_usable() {
    check_rejected(
        global("$tools"),
        "not a usable identifier",
        r#"code-runtime: binding global "$tools" is not a usable identifier"#,
    );
}

#[test]
fn c013_global_with_inner_dollar_is_not_usable() {
    check_rejected(
        global("a$b"),
        "not a usable identifier",
        r#"code-runtime: binding global "a$b" is not a usable identifier"#,
    );
}

#[test]
fn c014_global_lambda_is_not_usable() {
    check_rejected(
        global("lambda"),
        "not a usable identifier",
        r#"code-runtime: binding global "lambda" is not a usable identifier"#,
    );
}

#[test]
fn global_shapes_outside_the_identifier_grammar_are_not_usable() {
    for name in ["", "1tools", "tööls", "my-tools", "tools\n"] {
        let error = validate_bindings(&global(name)).expect_err(name);
        assert!(matches!(error, ContractError::UnusableGlobal { .. }), "{name:?}: {error}");
    }
    // The quoted name is JSON, so control characters cannot break the one-line message.
    let message = validate_bindings(&global("a\nb")).unwrap_err().to_string();
    assert_eq!(message, r#"code-runtime: binding global "a\nb" is not a usable identifier"#);
}

#[test]
fn c015_global_console_is_reserved() {
    check_rejected(
        global("console"),
        "reserved binding global",
        r#"code-runtime: reserved binding global "console""#,
    );
}

#[test]
fn c016_global_program_wrapper_is_reserved() {
    check_rejected(
        global(PROGRAM_WRAPPER_NAME),
        "reserved binding global",
        r#"code-runtime: reserved binding global "__code_runtime_main__""#,
    );
}

#[test]
fn c017_duplicate_global() {
    check_rejected(
        vec![tools(), CodeBindingNamespace::new("tools")],
        "duplicate binding global",
        r#"code-runtime: duplicate binding global "tools""#,
    );
}

#[test]
fn c018_namespace_named_like_an_error_class_is_fine() {
    assert_eq!(validate_bindings(&global("ToolCallError")), Ok(()));
}

#[test]
fn c019_error_class_with_space_is_not_usable() {
    check_rejected(
        error_class("not valid!", "toolName"),
        "not a usable identifier",
        r#"code-runtime: binding error class "not valid!" is not a usable identifier"#,
    );
}

#[test]
fn c020_error_class_await_is_not_usable() {
    check_rejected(
        error_class("await", "toolName"),
        "not a usable identifier",
        r#"code-runtime: binding error class "await" is not a usable identifier"#,
    );
}

#[test]
fn c021_error_class_console_is_reserved() {
    check_rejected(
        error_class("console", "toolName"),
        "reserved binding global",
        r#"code-runtime: reserved binding global "console""#,
    );
}

#[test]
fn c022_error_class_named_like_its_own_global() {
    check_rejected(
        error_class("tools", "toolName"),
        "duplicate injected global",
        r#"code-runtime: duplicate injected global "tools""#,
    );
}

#[test]
fn c023_two_namespaces_declaring_one_error_class() {
    check_rejected(
        vec![
            CodeBindingNamespace::new("tools").error_class("CallError", "toolName"),
            CodeBindingNamespace::new("helpers").error_class("CallError", "toolName"),
        ],
        "duplicate injected global",
        r#"code-runtime: duplicate injected global "CallError""#,
    );
}

#[test]
fn error_class_named_like_a_later_namespace_global() {
    check_rejected(
        vec![
            CodeBindingNamespace::new("tools").error_class("helpers", "toolName"),
            CodeBindingNamespace::new("helpers"),
        ],
        "duplicate injected global",
        r#"code-runtime: duplicate injected global "helpers""#,
    );
}

#[test]
fn c024_empty_member_property_is_not_usable() {
    check_rejected(
        error_class("ToolCallError", ""),
        "not usable",
        r#"code-runtime: binding error member property "" is not usable"#,
    );
}

#[test]
fn c025_member_property_message_is_not_usable() {
    check_rejected(
        error_class("ToolCallError", "message"),
        "not usable",
        r#"code-runtime: binding error member property "message" is not usable"#,
    );
}

#[test]
fn c026_member_property_args_is_not_usable() {
    check_rejected(
        error_class("ToolCallError", "args"),
        "not usable",
        r#"code-runtime: binding error member property "args" is not usable"#,
    );
}

#[test]
fn c027_member_property_dunder_is_not_usable() {
    check_rejected(
        error_class("ToolCallError", "__dict__"),
        "not usable",
        r#"code-runtime: binding error member property "__dict__" is not usable"#,
    );
}

#[test]
fn c028_member_properties_that_need_not_be_identifiers() {
    for member in ["toolName", "code", "with space", "constructor", "0", "cause"] {
        assert_eq!(validate_bindings(&error_class("ToolCallError", member)), Ok(()), "{member:?}");
    }
}

#[test]
fn c029_globals_are_checked_before_error_classes() {
    let namespaces = vec![
        CodeBindingNamespace::new("ok").error_class("bad name!", "m"),
        CodeBindingNamespace::new("$x"),
    ];
    check_rejected(
        namespaces,
        "not a usable identifier",
        r#"code-runtime: binding global "$x" is not a usable identifier"#,
    );
}

#[test]
fn function_names_are_not_validated() {
    let names =
        ["", "my-tool", "__proto__", "constructor", "hasOwnProperty", "toString", "with space"];
    let namespace = names.iter().fold(CodeBindingNamespace::new("tools"), |ns, name| {
        ns.function(*name, binding(|args| async move { Ok(args.into()) }))
    });
    assert_eq!(validate_bindings(&[namespace]), Ok(()));
}

#[test]
fn a_namespace_may_not_shadow_a_global_the_program_needs() {
    // docs/design.md §9 item 9: ECMAScript globals and Python builtins, for namespaces and classes.
    for name in
        ["print", "len", "Promise", "JSON", "Object", "setTimeout", "Error", "range", "__import__"]
    {
        assert!(SHADOWED_GLOBALS.contains(&name), "{name}");
        check_rejected(
            global(name),
            "would shadow",
            &format!(
                r#"code-runtime: binding global "{name}" would shadow a global the program needs"#
            ),
        );
        check_rejected(
            error_class(name, "toolName"),
            "would shadow",
            &format!(
                r#"code-runtime: binding global "{name}" would shadow a global the program needs"#
            ),
        );
    }
    for name in ["tools", "github", "ToolCallError", "search", "math", "json_tools"] {
        assert!(!SHADOWED_GLOBALS.contains(&name), "{name}");
        assert_eq!(validate_bindings(&global(name)), Ok(()));
    }
}

#[test]
fn the_shadowed_globals_are_distinct_usable_identifiers() {
    let mut seen = std::collections::HashSet::new();
    for name in SHADOWED_GLOBALS {
        assert!(seen.insert(name), "{name} listed twice");
        assert!(!PORTABLE_RESERVED_WORDS.contains(&name), "{name} is a reserved word already");
    }
}

#[test]
fn shadowing_is_checked_after_reserved_names_and_before_duplicates() {
    check_rejected(
        vec![CodeBindingNamespace::new("print"), CodeBindingNamespace::new("print")],
        "would shadow",
        r#"code-runtime: binding global "print" would shadow a global the program needs"#,
    );
    check_rejected(
        global("console"),
        "reserved",
        r#"code-runtime: reserved binding global "console""#,
    );
}

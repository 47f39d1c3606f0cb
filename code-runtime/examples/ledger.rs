//! The contract of `code-runtime` without a provider: validate binding declarations the way every
//! provider does, call host bindings, and settle a run's output through the shared ledger.
//!
//! `cargo xtask demo` runs this until the `code-runtime` command can run real programs.
#![allow(clippy::print_stdout, reason = "an example prints what it shows")]

use code_runtime::{
    BindingError, CodeBindingNamespace, CodeRunFailure, CodeRunRequest, Limits, Outcome,
    OutputLedger, binding, validate_bindings,
};
use serde_json::json;

fn main() {
    // The namespace a Code Mode consumer passes: its tools as async closures.
    let tools = CodeBindingNamespace::new("tools")
        .function(
            "search",
            binding(|args| async move {
                let query =
                    args["q"].as_str().ok_or_else(|| BindingError::new("q must be a string"))?;
                Ok(json!({ "hits": [format!("{query} book"), format!("{query} blog")] }))
            }),
        )
        .function("__proto__", binding(|args| async move { Ok(args) }))
        .error_class("ToolCallError", "toolName");

    println!("== binding declarations");
    let declarations = [
        ("tools", vec![tools.clone()]),
        ("$tools", vec![CodeBindingNamespace::new("$tools")]),
        ("console", vec![CodeBindingNamespace::new("console")]),
        ("tools twice", vec![tools.clone(), CodeBindingNamespace::new("tools")]),
        (
            "error class named tools",
            vec![CodeBindingNamespace::new("tools").error_class("tools", "toolName")],
        ),
        (
            "member property message",
            vec![CodeBindingNamespace::new("tools").error_class("E", "message")],
        ),
    ];
    for (label, namespaces) in declarations {
        match validate_bindings(&namespaces) {
            Ok(()) => println!("{label}: accepted"),
            Err(error) => println!("{label}: {error}"),
        }
    }

    println!("== binding calls");
    let runtime =
        tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime");
    for (name, args) in
        [("search", json!({ "q": "rust" })), ("search", json!({})), ("__proto__", json!([1]))]
    {
        let outcome = runtime.block_on(tools.functions[name].call(args));
        match outcome {
            Ok(value) => println!("tools.{name} resolved {value}"),
            Err(error) => println!("tools.{name} rejected: {error}"),
        }
    }

    println!("== output ledger");
    let cancelled = cancelled_token();
    let request = CodeRunRequest::new("return 1").binding(tools).signal(cancelled);
    let limits = Limits::default();
    limits.validate().expect("the defaults are valid");
    if let Ok(Some(settled)) = request.preflight(&limits) {
        println!("pre-cancelled request -> {}", settled.to_json());
    }
    let logs = ["searching rust", "2 hits", "picking the first"];
    for max in [200, 70, 40, 15] {
        let mut ledger = OutputLedger::new(max);
        for log in logs {
            let _ = ledger.admit_log(log.to_owned());
        }
        let returned = ledger
            .settle(Outcome::Completed(Some(json!({ "best": "rust book", "score": 1.5e-7 }))));
        println!("max {max:>3}, returned -> {}", returned.to_json());
    }
    let threw = OutputLedger::new(60)
        .settle(Outcome::Failed(CodeRunFailure::exception("Error: boom\n    at program:1:7")));
    println!("max  60, threw    -> {}", threw.to_json());
    let lossy = OutputLedger::new(200).settle(Outcome::Completed(Some(json!(-0.0))));
    println!("max 200, -0       -> {}", lossy.to_json());
}

fn cancelled_token() -> code_runtime::CancellationToken {
    let token = code_runtime::CancellationToken::new();
    token.cancel();
    token
}

//! Integration tests of the `code-runtime` crate, one binary with a module per concern. Tests named
//! `cNNN_…` cover the numbered case of docs/reference.md §5 (docs/conformance.md maps them).

mod approval;
mod binding;
mod context;
mod declaration;
mod fake;
mod host;
mod input;
mod ledger;
mod limits;
mod observe;
mod program_globals;
mod program_text;
mod result;
mod validation;

use code_runtime::{CodeRunFailure, CodeRunResult, FailureKind, JsonValue};

/// `null` nested in `depth` arrays, built without recursion.
fn nested_arrays(depth: usize) -> JsonValue {
    let mut value = JsonValue::Null;
    for _ in 0..depth {
        value = JsonValue::from(vec![value]);
    }
    value
}

/// The result a completed run with `logs` and `value` must equal. Results have no public
/// constructor (the ledger builds them), so expectations are read from their JSON form.
fn ok(logs: &[&str], value: Option<JsonValue>) -> CodeRunResult {
    let mut document = code_runtime::json!({ "logs": logs });
    if let Some(value) = value {
        document["value"] = value;
    }
    code_runtime::json::from_value(&document).expect("a valid result")
}

/// The result a failed run must equal.
fn failed(logs: &[&str], kind: FailureKind, message: &str) -> CodeRunResult {
    code_runtime::json::from_value(
        &code_runtime::json!({ "logs": logs, "error": { "kind": kind, "message": message } }),
    )
    .expect("a valid result")
}

/// A failure of `kind` with `message`.
fn failure(kind: FailureKind, message: &str) -> CodeRunFailure {
    code_runtime::json::from_value(&code_runtime::json!({ "kind": kind, "message": message }))
        .expect("a valid failure")
}

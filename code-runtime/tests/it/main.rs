//! Integration tests of the `code-runtime` crate, one binary with a module per concern. Tests named
//! `cNNN_…` cover the numbered case of REFERENCE.md §5 (docs/conformance.md maps them).

mod context;
mod json;
mod ledger;
mod limits;
mod result;
mod validation;

use code_runtime::JsonValue;

/// `null` nested in `depth` arrays, built without recursion.
fn nested_arrays(depth: usize) -> JsonValue {
    let mut value = JsonValue::Null;
    for _ in 0..depth {
        value = JsonValue::Array(vec![value]);
    }
    value
}

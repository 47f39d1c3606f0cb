//! The integration tests of `code-runtime-json`: the lossless rules, the meter, the walks that
//! never recurse, and `shrink`.

use code_runtime_json::JsonValue;

mod json;
mod shrink;

/// `[[[…null…]]]`, `depth` levels deep.
fn nested_arrays(depth: usize) -> JsonValue {
    let mut value = JsonValue::Null;
    for _ in 0..depth {
        value = JsonValue::from(vec![value]);
    }
    value
}

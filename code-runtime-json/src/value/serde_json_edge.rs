//! The crossing to and from `serde_json::Value`, the consumer edge: its own `Drop` and `Clone`
//! recurse once per level, so a value comes in through [`build`] (no recursion) and goes out only
//! when it nests at most [`SERDE_DEPTH`](crate::SERDE_DEPTH) levels ([`TooDeep`] otherwise).

use crate::value::{JsonValue, build};

/// Moves a `serde_json::Value` over without recursion.
impl From<serde_json::Value> for JsonValue {
    fn from(value: serde_json::Value) -> Self {
        build(value)
    }
}

/// Copies a `serde_json::Value` without recursion.
impl From<&serde_json::Value> for JsonValue {
    fn from(value: &serde_json::Value) -> Self {
        build(value)
    }
}

/// Why [`JsonValue::to_serde_json`] refused a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the value nests more than {limit} levels deep")]
pub struct TooDeep {
    /// The deepest nesting that converts.
    pub limit: usize,
}

impl JsonValue {
    /// A `serde_json::Value` copy of this value, for an API that takes one.
    ///
    /// `serde_json::Value`'s `Drop`, `Clone` and `Serialize` recurse once per level, so only a
    /// value at most [`SERDE_DEPTH`](crate::SERDE_DEPTH) levels deep converts (what
    /// `serde_json` itself parses); anything deeper stays in this type.
    ///
    /// # Errors
    ///
    /// [`TooDeep`] for a deeper value.
    pub fn to_serde_json(&self) -> Result<serde_json::Value, TooDeep> {
        let limit = crate::SERDE_DEPTH;
        if crate::nests_deeper_than(self, limit) {
            return Err(TooDeep { limit });
        }
        Ok(shallow_to_serde(self))
    }
}

/// A copy of a value known to nest at most [`SERDE_DEPTH`](crate::SERDE_DEPTH) levels;
/// recursion is bounded by that.
fn shallow_to_serde(value: &JsonValue) -> serde_json::Value {
    match value {
        JsonValue::Null => serde_json::Value::Null,
        JsonValue::Bool(value) => serde_json::Value::Bool(*value),
        JsonValue::Number(number) => serde_json::Value::Number(number.clone()),
        JsonValue::String(text) => serde_json::Value::String(text.clone()),
        JsonValue::Array(items) => {
            serde_json::Value::Array(items.iter().map(shallow_to_serde).collect())
        }
        JsonValue::Object(members) => serde_json::Value::Object(
            members.iter().map(|(key, item)| (key.clone(), shallow_to_serde(item))).collect(),
        ),
    }
}

//! Equality of values without recursion: two trees are compared one level per turn on a heap
//! stack, objects as maps (as JSON does); and the comparisons with Rust scalars, so
//! `value == "text"` and `value == 1` read as they do with `serde_json`.

use crate::value::{JsonMap, JsonValue};

/// Whether every pair on `stack` is equal, comparing one level per turn.
fn all_equal<'a>(mut stack: Vec<(&'a JsonValue, &'a JsonValue)>) -> bool {
    while let Some(pair) = stack.pop() {
        match pair {
            (JsonValue::Null, JsonValue::Null) => {}
            (JsonValue::Bool(a), JsonValue::Bool(b)) if a == b => {}
            (JsonValue::Number(a), JsonValue::Number(b)) if a == b => {}
            (JsonValue::String(a), JsonValue::String(b)) if a == b => {}
            (JsonValue::Array(a), JsonValue::Array(b)) if a.len() == b.len() => {
                stack.extend(a.iter().zip(b.iter()));
            }
            (JsonValue::Object(a), JsonValue::Object(b)) if a.len() == b.len() => {
                for (key, item) in a.iter() {
                    let Some(other) = b.get(key) else { return false };
                    stack.push((item, other));
                }
            }
            _ => return false,
        }
    }
    true
}

impl PartialEq for JsonValue {
    fn eq(&self, other: &Self) -> bool {
        all_equal(vec![(self, other)])
    }
}

impl Eq for JsonValue {}

impl PartialEq for JsonMap {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let mut pairs = Vec::with_capacity(self.len());
        for (key, item) in self.iter() {
            let Some(found) = other.get(key) else { return false };
            pairs.push((item, found));
        }
        all_equal(pairs)
    }
}

impl Eq for JsonMap {}

macro_rules! eq_scalar {
    ($($ty:ty => |$value:ident, $other:ident| $test:expr;)*) => {$(
        impl PartialEq<$ty> for JsonValue {
            fn eq(&self, other: &$ty) -> bool {
                let ($value, $other) = (self, other);
                $test
            }
        }
        impl PartialEq<JsonValue> for $ty {
            fn eq(&self, other: &JsonValue) -> bool {
                other == self
            }
        }
    )*};
}

eq_scalar! {
    str => |value, other| value.as_str() == Some(other);
    &str => |value, other| value.as_str() == Some(*other);
    String => |value, other| value.as_str() == Some(other.as_str());
    bool => |value, other| value.as_bool() == Some(*other);
    i64 => |value, other| value.as_i64() == Some(*other);
    i32 => |value, other| value.as_i64() == Some(i64::from(*other));
    u64 => |value, other| value.as_u64() == Some(*other);
    u32 => |value, other| value.as_u64() == Some(u64::from(*other));
    usize => |value, other| value.as_u64() == u64::try_from(*other).ok();
    f64 => |value, other| value.as_f64() == Some(*other);
}

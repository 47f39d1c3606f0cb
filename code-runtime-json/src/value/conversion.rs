//! The `From` conversions into a [`JsonValue`] from Rust's scalars, strings, containers and
//! options: what [`json!`](crate::json!) and callers building a value by hand rely on.

use std::borrow::Cow;

use serde_json::Number;

use crate::value::{JsonArray, JsonMap, JsonValue};

macro_rules! from_integer {
    ($($ty:ty),*) => {$(
        impl From<$ty> for JsonValue {
            fn from(value: $ty) -> Self {
                JsonValue::Number(Number::from(value))
            }
        }
    )*};
}

from_integer!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl From<f64> for JsonValue {
    /// A finite double as a number, `NaN` and the infinities as `null` (as `serde_json` does).
    fn from(value: f64) -> Self {
        Number::from_f64(value).map_or(JsonValue::Null, JsonValue::Number)
    }
}

impl From<f32> for JsonValue {
    fn from(value: f32) -> Self {
        JsonValue::from(f64::from(value))
    }
}

impl From<bool> for JsonValue {
    fn from(value: bool) -> Self {
        JsonValue::Bool(value)
    }
}

impl From<Number> for JsonValue {
    fn from(number: Number) -> Self {
        JsonValue::Number(number)
    }
}

impl From<String> for JsonValue {
    fn from(text: String) -> Self {
        JsonValue::String(text)
    }
}

impl From<&str> for JsonValue {
    fn from(text: &str) -> Self {
        JsonValue::String(text.to_owned())
    }
}

impl From<&String> for JsonValue {
    fn from(text: &String) -> Self {
        JsonValue::String(text.clone())
    }
}

impl From<Cow<'_, str>> for JsonValue {
    fn from(text: Cow<'_, str>) -> Self {
        JsonValue::String(text.into_owned())
    }
}

impl From<char> for JsonValue {
    fn from(c: char) -> Self {
        JsonValue::String(c.to_string())
    }
}

impl From<()> for JsonValue {
    fn from((): ()) -> Self {
        JsonValue::Null
    }
}

impl From<JsonArray> for JsonValue {
    fn from(items: JsonArray) -> Self {
        JsonValue::Array(items)
    }
}

impl From<JsonMap> for JsonValue {
    fn from(members: JsonMap) -> Self {
        JsonValue::Object(members)
    }
}

impl<T: Into<JsonValue>> From<Vec<T>> for JsonValue {
    fn from(items: Vec<T>) -> Self {
        JsonValue::Array(items.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<JsonValue>> From<Option<T>> for JsonValue {
    fn from(value: Option<T>) -> Self {
        value.map_or(JsonValue::Null, Into::into)
    }
}

impl<T: Into<JsonValue>> FromIterator<T> for JsonValue {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        JsonValue::Array(items.into_iter().map(Into::into).collect())
    }
}

//! The [`json!`](crate::json!) macro and [`ToJson`], how it turns an interpolated expression into
//! a [`JsonValue`].

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Number;

use crate::value::{JsonArray, JsonMap};
use crate::{JsonValue, to_value};

/// Builds a [`JsonValue`] from JSON-like syntax, as `serde_json::json!` does:
///
/// ```
/// use code_runtime_json::{self as json, json};
///
/// let query = "rust";
/// let hits = json!([{ "title": "The book", "score": 0.9 }]);
/// let value = json!({ "query": query, "hits": hits, "page": 1, "more": null });
/// assert_eq!(value["hits"][0]["title"], "The book");
/// assert_eq!(json::encode(&value), r#"{"query":"rust","hits":[{"title":"The book","score":0.9}],"page":1,"more":null}"#);
/// ```
///
/// An interpolated expression is borrowed and converted: through [`ToJson`] when its type has
/// it (this crate's values are copied without recursion, whatever their depth), else through its
/// `Serialize` impl. Keys are string literals or parenthesised expressions that make a string.
///
/// # Panics
///
/// When an interpolated value's `Serialize` impl fails (a map whose keys are not strings), as
/// `serde_json::json!` does.
#[macro_export]
macro_rules! json {
    ($($body:tt)+) => {
        $crate::__json_value!($($body)+)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __json_value {
    (null) => {
        $crate::JsonValue::Null
    };
    ([]) => {
        $crate::JsonValue::Array($crate::JsonArray::new())
    };
    ([ $($items:tt)+ ]) => {
        $crate::JsonValue::Array($crate::JsonArray::from($crate::__json_items!(@items [] $($items)+)))
    };
    ({}) => {
        $crate::JsonValue::Object($crate::JsonMap::new())
    };
    ({ $($members:tt)+ }) => {{
        let mut members = $crate::JsonMap::new();
        $crate::__json_members!(members $($members)+);
        $crate::JsonValue::Object(members)
    }};
    ($other:expr) => {{
        #[allow(unused_imports, reason = "one of the two applies, depending on the type")]
        use $crate::__private::{ViaSerialize as _, ViaToJson as _};
        (&&$crate::__private::Interpolated(&$other)).__to_json()
    }};
}

/// Array items, one per step: `[items so far] tokens left`.
#[doc(hidden)]
#[macro_export]
macro_rules! __json_items {
    (@items [$($done:expr,)*]) => {
        ::std::vec![$($done,)*]
    };
    // A JSON literal or a container is taken whole, so `{` never starts a block expression.
    (@items [$($done:expr,)*] null $($rest:tt)*) => {
        $crate::__json_items!(@comma [$($done,)* $crate::JsonValue::Null,] $($rest)*)
    };
    (@items [$($done:expr,)*] [$($array:tt)*] $($rest:tt)*) => {
        $crate::__json_items!(@comma [$($done,)* $crate::__json_value!([$($array)*]),] $($rest)*)
    };
    (@items [$($done:expr,)*] {$($object:tt)*} $($rest:tt)*) => {
        $crate::__json_items!(@comma [$($done,)* $crate::__json_value!({$($object)*}),] $($rest)*)
    };
    (@items [$($done:expr,)*] $next:expr, $($rest:tt)*) => {
        $crate::__json_items!(@items [$($done,)* $crate::__json_value!($next),] $($rest)*)
    };
    (@items [$($done:expr,)*] $last:expr) => {
        $crate::__json_items!(@items [$($done,)* $crate::__json_value!($last),])
    };
    (@comma [$($done:expr,)*]) => {
        $crate::__json_items!(@items [$($done,)*])
    };
    (@comma [$($done:expr,)*], $($rest:tt)*) => {
        $crate::__json_items!(@items [$($done,)*] $($rest)*)
    };
}

/// Object members into `$map`, one per step. A key is a literal, a parenthesised expression or a
/// variable, and makes a `String`.
#[doc(hidden)]
#[macro_export]
macro_rules! __json_members {
    ($map:ident) => {};
    ($map:ident $key:literal : $($rest:tt)+) => {
        $crate::__json_members!($map @value ($key) $($rest)+)
    };
    ($map:ident ($key:expr) : $($rest:tt)+) => {
        $crate::__json_members!($map @value ($key) $($rest)+)
    };
    ($map:ident $key:ident : $($rest:tt)+) => {
        $crate::__json_members!($map @value ($key) $($rest)+)
    };
    ($map:ident @value ($key:expr) null $($rest:tt)*) => {
        $map.insert(::std::string::String::from($key), $crate::JsonValue::Null);
        $crate::__json_members!($map @comma $($rest)*)
    };
    ($map:ident @value ($key:expr) [$($array:tt)*] $($rest:tt)*) => {
        $map.insert(::std::string::String::from($key), $crate::__json_value!([$($array)*]));
        $crate::__json_members!($map @comma $($rest)*)
    };
    ($map:ident @value ($key:expr) {$($object:tt)*} $($rest:tt)*) => {
        $map.insert(::std::string::String::from($key), $crate::__json_value!({$($object)*}));
        $crate::__json_members!($map @comma $($rest)*)
    };
    ($map:ident @value ($key:expr) $value:expr, $($rest:tt)*) => {
        $map.insert(::std::string::String::from($key), $crate::__json_value!($value));
        $crate::__json_members!($map $($rest)*)
    };
    ($map:ident @value ($key:expr) $value:expr) => {
        $map.insert(::std::string::String::from($key), $crate::__json_value!($value));
    };
    ($map:ident @comma) => {};
    ($map:ident @comma, $($rest:tt)*) => {
        $crate::__json_members!($map $($rest)*)
    };
    // Any other key: its tokens up to the colon.
    ($map:ident @key [$($key:tt)+] : $($rest:tt)+) => {
        $crate::__json_members!($map @value ($($key)+) $($rest)+)
    };
    ($map:ident @key [$($key:tt)+] $next:tt $($rest:tt)*) => {
        $crate::__json_members!($map @key [$($key)+ $next] $($rest)*)
    };
    ($map:ident $first:tt $($rest:tt)*) => {
        $crate::__json_members!($map @key [$first] $($rest)*)
    };
}

/// Types that become a [`JsonValue`] by copy, without serde: what [`json!`](crate::json!) uses
/// for an interpolated expression when its type has it. This crate's values are copied without
/// recursion whatever their depth; a `serde_json::Value` likewise.
pub trait ToJson {
    /// This value as a [`JsonValue`].
    fn to_json(&self) -> JsonValue;
}

impl ToJson for JsonValue {
    fn to_json(&self) -> JsonValue {
        self.clone()
    }
}

impl ToJson for JsonArray {
    fn to_json(&self) -> JsonValue {
        JsonValue::Array(self.clone())
    }
}

impl ToJson for JsonMap {
    fn to_json(&self) -> JsonValue {
        JsonValue::Object(self.clone())
    }
}

impl ToJson for serde_json::Value {
    fn to_json(&self) -> JsonValue {
        JsonValue::from(self)
    }
}

impl ToJson for Number {
    fn to_json(&self) -> JsonValue {
        JsonValue::Number(self.clone())
    }
}

impl ToJson for str {
    fn to_json(&self) -> JsonValue {
        JsonValue::String(self.to_owned())
    }
}

impl ToJson for String {
    fn to_json(&self) -> JsonValue {
        JsonValue::String(self.clone())
    }
}

impl ToJson for std::borrow::Cow<'_, str> {
    fn to_json(&self) -> JsonValue {
        JsonValue::String(self.to_string())
    }
}

impl ToJson for char {
    fn to_json(&self) -> JsonValue {
        JsonValue::String(self.to_string())
    }
}

impl ToJson for bool {
    fn to_json(&self) -> JsonValue {
        JsonValue::Bool(*self)
    }
}

impl ToJson for () {
    fn to_json(&self) -> JsonValue {
        JsonValue::Null
    }
}

macro_rules! to_json_by_copy {
    ($($ty:ty),*) => {$(
        impl ToJson for $ty {
            fn to_json(&self) -> JsonValue {
                JsonValue::from(*self)
            }
        }
    )*};
}

to_json_by_copy!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);

impl<T: ToJson + ?Sized> ToJson for &T {
    fn to_json(&self) -> JsonValue {
        (**self).to_json()
    }
}

impl<T: ToJson + ?Sized> ToJson for &mut T {
    fn to_json(&self) -> JsonValue {
        (**self).to_json()
    }
}

impl<T: ToJson + ?Sized> ToJson for Box<T> {
    fn to_json(&self) -> JsonValue {
        (**self).to_json()
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> JsonValue {
        self.as_ref().map_or(JsonValue::Null, ToJson::to_json)
    }
}

impl<T: ToJson> ToJson for [T] {
    fn to_json(&self) -> JsonValue {
        JsonValue::Array(self.iter().map(ToJson::to_json).collect())
    }
}

impl<T: ToJson, const N: usize> ToJson for [T; N] {
    fn to_json(&self) -> JsonValue {
        self.as_slice().to_json()
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> JsonValue {
        self.as_slice().to_json()
    }
}

impl<K: AsRef<str>, V: ToJson, S> ToJson for HashMap<K, V, S> {
    fn to_json(&self) -> JsonValue {
        JsonValue::Object(self.iter().map(|(key, value)| (key.as_ref(), value.to_json())).collect())
    }
}

impl<K: AsRef<str>, V: ToJson> ToJson for BTreeMap<K, V> {
    fn to_json(&self) -> JsonValue {
        JsonValue::Object(self.iter().map(|(key, value)| (key.as_ref(), value.to_json())).collect())
    }
}

/// An expression [`json!`](crate::json!) interpolates, borrowed. Method resolution on
/// `&&Interpolated(&x)` finds [`ViaToJson`] first when `x`'s type has [`ToJson`], and
/// [`ViaSerialize`] otherwise (one auto-deref later).
#[doc(hidden)]
pub struct Interpolated<'a, T: ?Sized>(pub &'a T);

impl<T: ?Sized> std::fmt::Debug for Interpolated<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interpolated(..)")
    }
}

#[doc(hidden)]
pub trait ViaToJson {
    fn __to_json(&self) -> JsonValue;
}

impl<T: ToJson + ?Sized> ViaToJson for &Interpolated<'_, T> {
    fn __to_json(&self) -> JsonValue {
        self.0.to_json()
    }
}

#[doc(hidden)]
pub trait ViaSerialize {
    fn __to_json(&self) -> JsonValue;
}

impl<T: Serialize + ?Sized> ViaSerialize for Interpolated<'_, T> {
    fn __to_json(&self) -> JsonValue {
        match to_value(self.0) {
            Ok(value) => value,
            Err(error) => panic!("json!: the interpolated value does not serialize: {error}"),
        }
    }
}

//! `value["key"]` and `value[0]`: [`JsonIndex`], the sealed set of what indexes a [`JsonValue`]
//! (a `usize` or a string), and the `Index` and `IndexMut` impls over it. Apart from the type
//! because indexing has rules of its own, those of `serde_json`: reading what is missing gives
//! `null`, and assigning to a missing key of an object (or of `null`) makes the member.

use std::ops::{Index, IndexMut};

use crate::value::{JsonMap, JsonValue};

/// The `null` an index that finds nothing reads.
static NULL: JsonValue = JsonValue::Null;

/// What indexes a [`JsonValue`]: a `usize` into an array, a string key into an object.
pub trait JsonIndex: private::Sealed {
    #[doc(hidden)]
    fn find<'v>(&self, value: &'v JsonValue) -> Option<&'v JsonValue>;
    #[doc(hidden)]
    fn find_mut<'v>(&self, value: &'v mut JsonValue) -> Option<&'v mut JsonValue>;
    /// The slot to assign through, made if need be (`value["a"] = ..` on `null` or an object).
    #[doc(hidden)]
    fn slot<'v>(&self, value: &'v mut JsonValue) -> &'v mut JsonValue;
}

mod private {
    pub trait Sealed {}
    impl Sealed for usize {}
    impl Sealed for str {}
    impl Sealed for String {}
    impl<T: Sealed + ?Sized> Sealed for &T {}
}

impl JsonIndex for usize {
    fn find<'v>(&self, value: &'v JsonValue) -> Option<&'v JsonValue> {
        value.as_array()?.get(*self)
    }

    fn find_mut<'v>(&self, value: &'v mut JsonValue) -> Option<&'v mut JsonValue> {
        value.as_array_mut()?.get_mut(*self)
    }

    fn slot<'v>(&self, value: &'v mut JsonValue) -> &'v mut JsonValue {
        match value {
            JsonValue::Array(items) => {
                let len = items.len();
                items
                    .get_mut(*self)
                    .unwrap_or_else(|| panic!("cannot index an array of {len} items at {}", *self))
            }
            other => panic!("cannot index {} with a number", kind(other)),
        }
    }
}

impl JsonIndex for str {
    fn find<'v>(&self, value: &'v JsonValue) -> Option<&'v JsonValue> {
        value.as_object()?.get(self)
    }

    fn find_mut<'v>(&self, value: &'v mut JsonValue) -> Option<&'v mut JsonValue> {
        value.as_object_mut()?.get_mut(self)
    }

    fn slot<'v>(&self, value: &'v mut JsonValue) -> &'v mut JsonValue {
        if value.is_null() {
            *value = JsonValue::Object(JsonMap::new());
        }
        match value {
            JsonValue::Object(members) => members.0.entry(self.to_owned()).or_default(),
            other => panic!("cannot index {} with a string", kind(other)),
        }
    }
}

impl JsonIndex for String {
    fn find<'v>(&self, value: &'v JsonValue) -> Option<&'v JsonValue> {
        JsonIndex::find(self.as_str(), value)
    }

    fn find_mut<'v>(&self, value: &'v mut JsonValue) -> Option<&'v mut JsonValue> {
        JsonIndex::find_mut(self.as_str(), value)
    }

    fn slot<'v>(&self, value: &'v mut JsonValue) -> &'v mut JsonValue {
        JsonIndex::slot(self.as_str(), value)
    }
}

impl<T: JsonIndex + ?Sized> JsonIndex for &T {
    fn find<'v>(&self, value: &'v JsonValue) -> Option<&'v JsonValue> {
        (**self).find(value)
    }

    fn find_mut<'v>(&self, value: &'v mut JsonValue) -> Option<&'v mut JsonValue> {
        (**self).find_mut(value)
    }

    fn slot<'v>(&self, value: &'v mut JsonValue) -> &'v mut JsonValue {
        (**self).slot(value)
    }
}

fn kind(value: &JsonValue) -> &'static str {
    match value {
        JsonValue::Null => "null",
        JsonValue::Bool(_) => "a boolean",
        JsonValue::Number(_) => "a number",
        JsonValue::String(_) => "a string",
        JsonValue::Array(_) => "an array",
        JsonValue::Object(_) => "an object",
    }
}

/// `value["key"]` and `value[0]`: the member or item, or `null` when there is none.
impl<I: JsonIndex> Index<I> for JsonValue {
    type Output = JsonValue;

    fn index(&self, index: I) -> &JsonValue {
        index.find(self).unwrap_or(&NULL)
    }
}

/// `value["key"] = ..` makes the member (and makes `null` an object first); `value[0] = ..` sets
/// an existing item.
///
/// # Panics
///
/// On a string key into something that is neither an object nor `null`, and on an array index
/// out of bounds or into something that is not an array, as `serde_json` does.
impl<I: JsonIndex> IndexMut<I> for JsonValue {
    fn index_mut(&mut self, index: I) -> &mut JsonValue {
        index.slot(self)
    }
}

//! [`JsonValue`], [`JsonArray`] and [`JsonMap`]: the owned JSON tree whose drop, clone and
//! comparison never recurse, whatever its depth.
//!
//! The rule lives in the two container types: every nested value sits in a [`JsonArray`] or a
//! [`JsonMap`], and their `Drop` takes their children apart on a heap stack. `JsonValue` itself
//! has no `Drop`, so `match value { JsonValue::String(text) => text, .. }` moves out as usual.
//!
//! This file owns the types, their accessors and their `Drop`; the submodules own what else a
//! value does, each a walk of its own: copying (`tree`), comparing (`equality`), indexing
//! (`index`), conversions from Rust values (`conversion`) and the crossing to `serde_json`
//! (`serde_json_edge`). They are children, not siblings, because the containers' fields are
//! private to this module and its children alone.

use std::fmt;
use std::ops::{Deref, DerefMut};

use indexmap::IndexMap;
use serde_json::Number;

pub use self::index::JsonIndex;
pub use self::serde_json_edge::TooDeep;
pub(crate) use self::tree::{Node, Tree, build};

mod conversion;
mod equality;
mod index;
mod serde_json_edge;
mod tree;

/// A JSON value: what a program hands the host and the host hands a program.
///
/// Objects keep their keys in insertion order (JavaScript's own-key order), so `{b: 1, a: 2}`
/// comes back as `{"b":1,"a":2}`. Equality compares objects as maps, as JSON does.
///
/// Depth is unbounded, and nothing here recurses: dropping, cloning, comparing, printing
/// (`Display` and `Debug` write the JSON text), encoding and serializing a value nested
/// 1 000 000 levels deep uses no call stack per level. `Serialize` writes containers deeper
/// than [`SERDE_DEPTH`](crate::SERDE_DEPTH) as one raw JSON text (serde's data model
/// nests one call per level), and `Deserialize` refuses them; [`json::parse`](crate::parse)
/// reads any depth. Build values with [`json!`](crate::json!) or the `From` conversions;
/// [`JsonValue::from`] a `serde_json::Value` and [`JsonValue::to_serde_json`] are the explicit
/// crossings to `serde_json`'s type, whose own `Drop` and `Clone` recurse.
#[derive(Default)]
pub enum JsonValue {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number (see [`json`](crate) for which ones are lossless).
    Number(Number),
    /// A string.
    String(String),
    /// An array.
    Array(JsonArray),
    /// An object, keys in insertion order.
    Object(JsonMap),
}

/// The items of a JSON array: a `Vec<JsonValue>` (it derefs to one) that drops without
/// recursion.
#[derive(Default, PartialEq, Eq)]
pub struct JsonArray(Vec<JsonValue>);

/// The members of a JSON object, in insertion order: an `IndexMap<String, JsonValue>` (it derefs
/// to one) that drops without recursion. Boxed, so a [`JsonValue`] is 32 bytes.
#[derive(Default)]
pub struct JsonMap(Box<IndexMap<String, JsonValue>>);

impl JsonValue {
    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, JsonValue::Null)
    }

    /// Whether this is `true` or `false`.
    pub fn is_boolean(&self) -> bool {
        matches!(self, JsonValue::Bool(_))
    }

    /// Whether this is a number.
    pub fn is_number(&self) -> bool {
        matches!(self, JsonValue::Number(_))
    }

    /// Whether this is a string.
    pub fn is_string(&self) -> bool {
        matches!(self, JsonValue::String(_))
    }

    /// Whether this is an array.
    pub fn is_array(&self) -> bool {
        matches!(self, JsonValue::Array(_))
    }

    /// Whether this is an object.
    pub fn is_object(&self) -> bool {
        matches!(self, JsonValue::Object(_))
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            JsonValue::Bool(value) => Some(*value),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            JsonValue::Number(number) => Some(number),
            _ => None,
        }
    }

    /// The number as an `i64`, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number()?.as_i64()
    }

    /// The number as a `u64`, if it is a non-negative integer that fits.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number()?.as_u64()
    }

    /// The number as an `f64`, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number()?.as_f64()
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsonValue::String(text) => Some(text),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&JsonArray> {
        match self {
            JsonValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The items, mutably, if this is an array.
    pub fn as_array_mut(&mut self) -> Option<&mut JsonArray> {
        match self {
            JsonValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The members, if this is an object.
    pub fn as_object(&self) -> Option<&JsonMap> {
        match self {
            JsonValue::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The members, mutably, if this is an object.
    pub fn as_object_mut(&mut self) -> Option<&mut JsonMap> {
        match self {
            JsonValue::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The member `key` of an object, or the item at a `usize` index of an array.
    pub fn get<I: JsonIndex>(&self, index: I) -> Option<&JsonValue> {
        index.find(self)
    }

    /// [`get`](JsonValue::get), mutably.
    pub fn get_mut<I: JsonIndex>(&mut self, index: I) -> Option<&mut JsonValue> {
        index.find_mut(self)
    }

    /// Takes the value out, leaving `null`.
    pub fn take(&mut self) -> JsonValue {
        std::mem::take(self)
    }

    /// The value at a JSON Pointer (RFC 6901) such as `/hits/0/title`; `""` is the value itself.
    pub fn pointer(&self, pointer: &str) -> Option<&JsonValue> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        let mut target = self;
        for token in rest.split('/') {
            let token = token.replace("~1", "/").replace("~0", "~");
            target = match target {
                JsonValue::Object(members) => members.get(&token)?,
                JsonValue::Array(items) => {
                    if token.len() > 1 && token.starts_with('0') {
                        return None;
                    }
                    items.get(token.parse::<usize>().ok()?)?
                }
                _ => return None,
            };
        }
        Some(target)
    }

    /// Whether dropping this value drops nothing nested: a scalar or an empty container.
    fn is_flat(&self) -> bool {
        match self {
            JsonValue::Array(items) => items.is_empty(),
            JsonValue::Object(members) => members.is_empty(),
            _ => true,
        }
    }
}

/// Takes the values on `stack` apart one level at a time: each container's children move onto
/// the stack before the container drops, so every drop that runs is a flat one.
fn dismantle(mut stack: Vec<JsonValue>) {
    while let Some(mut value) = stack.pop() {
        match &mut value {
            JsonValue::Array(items) => stack.append(&mut items.0),
            JsonValue::Object(members) => stack.extend(members.0.drain(..).map(|(_, item)| item)),
            _ => {}
        }
    }
}

impl Drop for JsonArray {
    fn drop(&mut self) {
        if !self.0.iter().all(JsonValue::is_flat) {
            dismantle(std::mem::take(&mut self.0));
        }
    }
}

impl Drop for JsonMap {
    fn drop(&mut self) {
        if !self.0.values().all(JsonValue::is_flat) {
            dismantle(self.0.drain(..).map(|(_, item)| item).collect());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The containers.

impl JsonArray {
    /// An empty array.
    pub fn new() -> Self {
        Self::default()
    }

    /// The items, moved out.
    pub fn into_vec(mut self) -> Vec<JsonValue> {
        std::mem::take(&mut self.0)
    }
}

impl Deref for JsonArray {
    type Target = Vec<JsonValue>;

    fn deref(&self) -> &Vec<JsonValue> {
        &self.0
    }
}

impl DerefMut for JsonArray {
    fn deref_mut(&mut self) -> &mut Vec<JsonValue> {
        &mut self.0
    }
}

impl From<Vec<JsonValue>> for JsonArray {
    fn from(items: Vec<JsonValue>) -> Self {
        JsonArray(items)
    }
}

impl FromIterator<JsonValue> for JsonArray {
    fn from_iter<I: IntoIterator<Item = JsonValue>>(items: I) -> Self {
        JsonArray(items.into_iter().collect())
    }
}

impl IntoIterator for JsonArray {
    type Item = JsonValue;
    type IntoIter = std::vec::IntoIter<JsonValue>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a> IntoIterator for &'a JsonArray {
    type Item = &'a JsonValue;
    type IntoIter = std::slice::Iter<'a, JsonValue>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a mut JsonArray {
    type Item = &'a mut JsonValue;
    type IntoIter = std::slice::IterMut<'a, JsonValue>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut()
    }
}

impl JsonMap {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty object with room for `capacity` members.
    pub fn with_capacity(capacity: usize) -> Self {
        JsonMap(Box::new(IndexMap::with_capacity(capacity)))
    }

    /// The member `key`.
    pub fn get(&self, key: &str) -> Option<&JsonValue> {
        self.0.get(key)
    }

    /// The member `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut JsonValue> {
        self.0.get_mut(key)
    }

    /// Whether there is a member `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets the member `key`: a new key goes last, an existing one keeps its place and hands back
    /// its old value (as `JSON.parse` and JavaScript assignment do).
    pub fn insert(&mut self, key: impl Into<String>, value: JsonValue) -> Option<JsonValue> {
        self.0.insert(key.into(), value)
    }

    /// Removes the member `key`, keeping the others in order.
    pub fn remove(&mut self, key: &str) -> Option<JsonValue> {
        self.0.shift_remove(key)
    }

    /// Removes the member `key`, keeping the others in order, with its key.
    pub fn remove_entry(&mut self, key: &str) -> Option<(String, JsonValue)> {
        self.0.shift_remove_entry(key)
    }
}

impl Deref for JsonMap {
    type Target = IndexMap<String, JsonValue>;

    fn deref(&self) -> &IndexMap<String, JsonValue> {
        &self.0
    }
}

impl DerefMut for JsonMap {
    fn deref_mut(&mut self) -> &mut IndexMap<String, JsonValue> {
        &mut self.0
    }
}

impl<K: Into<String>> FromIterator<(K, JsonValue)> for JsonMap {
    fn from_iter<I: IntoIterator<Item = (K, JsonValue)>>(members: I) -> Self {
        let mut map = JsonMap::new();
        for (key, value) in members {
            map.insert(key, value);
        }
        map
    }
}

impl<K: Into<String>> Extend<(K, JsonValue)> for JsonMap {
    fn extend<I: IntoIterator<Item = (K, JsonValue)>>(&mut self, members: I) {
        for (key, value) in members {
            self.insert(key, value);
        }
    }
}

impl IntoIterator for JsonMap {
    type Item = (String, JsonValue);
    type IntoIter = indexmap::map::IntoIter<String, JsonValue>;

    fn into_iter(mut self) -> Self::IntoIter {
        std::mem::take(&mut *self.0).into_iter()
    }
}

impl<'a> IntoIterator for &'a JsonMap {
    type Item = (&'a String, &'a JsonValue);
    type IntoIter = indexmap::map::Iter<'a, String, JsonValue>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a mut JsonMap {
    type Item = (&'a String, &'a mut JsonValue);
    type IntoIter = indexmap::map::IterMut<'a, String, JsonValue>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut()
    }
}

impl fmt::Debug for JsonArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (index, item) in self.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            fmt::Debug::fmt(item, f)?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for JsonMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (index, (key, item)) in self.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            f.write_str(&crate::quote(key))?;
            f.write_str(":")?;
            fmt::Debug::fmt(item, f)?;
        }
        f.write_str("}")
    }
}

impl From<IndexMap<String, JsonValue>> for JsonMap {
    fn from(members: IndexMap<String, JsonValue>) -> Self {
        JsonMap(Box::new(members))
    }
}

//! [`JsonValue`], [`JsonArray`] and [`JsonMap`]: the owned JSON tree whose drop, clone and
//! comparison never recurse, whatever its depth.
//!
//! The rule lives in the two container types: every nested value sits in a [`JsonArray`] or a
//! [`JsonMap`], and their `Drop` takes their children apart on a heap stack. `JsonValue` itself
//! has no `Drop`, so `match value { JsonValue::String(text) => text, .. }` moves out as usual.

use std::borrow::Cow;
use std::fmt;
use std::ops::{Deref, DerefMut, Index, IndexMut};

use indexmap::IndexMap;
use serde_json::Number;

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

/// The `null` an index that finds nothing reads.
static NULL: JsonValue = JsonValue::Null;

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
// Clone and equality, without recursion.

/// A tree [`build`] copies into a [`JsonValue`]: ours by reference, or `serde_json`'s.
pub(crate) trait Tree: Sized {
    type Key: Into<String>;
    type Items: Iterator<Item = Self>;
    type Members: Iterator<Item = (Self::Key, Self)>;

    /// This node: a flat value, or a container's children and their number.
    fn node(self) -> Node<Self::Items, Self::Members>;
}

pub(crate) enum Node<I, M> {
    Flat(JsonValue),
    Array(I, usize),
    Object(M, usize),
}

/// A container being built: the source's children still to visit, the copy so far, and (in an
/// object) the key of the child being built.
enum Building<T: Tree> {
    Array(T::Items, Vec<JsonValue>),
    Object(T::Members, IndexMap<String, JsonValue>, Option<T::Key>),
}

/// A copy of `root` built on a heap stack, one container per frame.
pub(crate) fn build<T: Tree>(root: T) -> JsonValue {
    let mut stack: Vec<Building<T>> = Vec::new();
    // The value just finished, to attach to the innermost open container.
    let mut done = open(root, &mut stack);
    loop {
        let Some(top) = stack.last_mut() else {
            return done.unwrap_or_default();
        };
        let next = match top {
            Building::Array(source, items) => {
                items.extend(done.take());
                source.next()
            }
            Building::Object(source, members, key) => {
                if let (Some(value), Some(name)) = (done.take(), key.take()) {
                    members.insert(name.into(), value);
                }
                source.next().map(|(name, item)| {
                    *key = Some(name);
                    item
                })
            }
        };
        done = match next {
            Some(item) => open(item, &mut stack),
            None => stack.pop().map(|frame| match frame {
                Building::Array(_, items) => JsonValue::Array(JsonArray(items)),
                Building::Object(_, members, _) => JsonValue::Object(JsonMap(Box::new(members))),
            }),
        };
    }
}

/// `value` when it is flat; otherwise `None`, with a frame for it pushed.
fn open<T: Tree>(value: T, stack: &mut Vec<Building<T>>) -> Option<JsonValue> {
    match value.node() {
        Node::Flat(flat) => Some(flat),
        Node::Array(items, len) => {
            stack.push(Building::Array(items, Vec::with_capacity(len)));
            None
        }
        Node::Object(members, len) => {
            stack.push(Building::Object(members, IndexMap::with_capacity(len), None));
            None
        }
    }
}

impl<'a> Tree for &'a JsonValue {
    type Key = &'a String;
    type Items = std::slice::Iter<'a, JsonValue>;
    type Members = indexmap::map::Iter<'a, String, JsonValue>;

    fn node(self) -> Node<Self::Items, Self::Members> {
        match self {
            JsonValue::Null => Node::Flat(JsonValue::Null),
            JsonValue::Bool(value) => Node::Flat(JsonValue::Bool(*value)),
            JsonValue::Number(number) => Node::Flat(JsonValue::Number(number.clone())),
            JsonValue::String(text) => Node::Flat(JsonValue::String(text.clone())),
            JsonValue::Array(items) => Node::Array(items.0.iter(), items.len()),
            JsonValue::Object(members) => Node::Object(members.0.iter(), members.len()),
        }
    }
}

impl Tree for serde_json::Value {
    type Key = String;
    type Items = std::vec::IntoIter<serde_json::Value>;
    type Members = serde_json::map::IntoIter;

    /// Moving a container's children out before it drops keeps `serde_json`'s recursive `Drop`
    /// from ever running deep.
    fn node(self) -> Node<Self::Items, Self::Members> {
        match self {
            serde_json::Value::Null => Node::Flat(JsonValue::Null),
            serde_json::Value::Bool(value) => Node::Flat(JsonValue::Bool(value)),
            serde_json::Value::Number(number) => Node::Flat(JsonValue::Number(number)),
            serde_json::Value::String(text) => Node::Flat(JsonValue::String(text)),
            serde_json::Value::Array(items) => {
                let len = items.len();
                Node::Array(items.into_iter(), len)
            }
            serde_json::Value::Object(members) => {
                let len = members.len();
                Node::Object(members.into_iter(), len)
            }
        }
    }
}

impl<'a> Tree for &'a serde_json::Value {
    type Key = &'a String;
    type Items = std::slice::Iter<'a, serde_json::Value>;
    type Members = serde_json::map::Iter<'a>;

    fn node(self) -> Node<Self::Items, Self::Members> {
        match self {
            serde_json::Value::Null => Node::Flat(JsonValue::Null),
            serde_json::Value::Bool(value) => Node::Flat(JsonValue::Bool(*value)),
            serde_json::Value::Number(number) => Node::Flat(JsonValue::Number(number.clone())),
            serde_json::Value::String(text) => Node::Flat(JsonValue::String(text.clone())),
            serde_json::Value::Array(items) => Node::Array(items.iter(), items.len()),
            serde_json::Value::Object(members) => Node::Object(members.iter(), members.len()),
        }
    }
}

impl Clone for JsonValue {
    fn clone(&self) -> Self {
        build(self)
    }
}

impl Clone for JsonArray {
    fn clone(&self) -> Self {
        let mut items = Vec::with_capacity(self.len());
        items.extend(self.iter().map(build));
        JsonArray(items)
    }
}

impl Clone for JsonMap {
    fn clone(&self) -> Self {
        self.iter().map(|(key, item)| (key.clone(), build(item))).collect()
    }
}

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

// ---------------------------------------------------------------------------------------------
// Indexing.

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

// ---------------------------------------------------------------------------------------------
// Conversions into a value.

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

// ---------------------------------------------------------------------------------------------
// `serde_json::Value`, the consumer edge.

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

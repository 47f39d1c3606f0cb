//! The one way a [`JsonValue`] is built from another tree without recursion: [`build`] copies
//! any [`Tree`] (ours by reference, `serde_json`'s by value or reference, `shrink`'s view) on a
//! heap stack, one container per frame. `Clone` is a build from `&JsonValue`, which is why it
//! lives here: a derived `Clone` would recurse once per level.

use indexmap::IndexMap;

use crate::value::{JsonArray, JsonMap, JsonValue};

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

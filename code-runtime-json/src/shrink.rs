//! [`shrink`]: values made to fit a byte budget by cutting their largest parts, keeping valid
//! JSON of the same shape with explicit markers (docs/design.md §14).
//!
//! One knob, `t`, sets three caps: a string longer than `t` bytes keeps its first `t` bytes (at
//! a character boundary) and ends with `…[truncated N chars]`; an array or object with more than
//! `t / 8` members keeps the first ones, plus `"… N more items"` (an array) or
//! `"…": "N more keys"` (an object); an array or object nested deeper than `t / 2` levels (never
//! the outermost) becomes the string `…[truncated N values]`, N counting what it held. Only what
//! is over a cap is cut, so the largest parts go
//! first, and everything under it stays whole. The largest `t` whose result fits is found by
//! bisection, each step measuring the result without building it; the result is built once.
//! Keys, numbers, booleans and `null` are never changed. Nothing here recurses: the measure keeps
//! a heap stack, and the copy is [`build`]'s.

use std::fmt::Write as _;

use crate::encode::spell_number;
use crate::string_len;
use crate::value::{JsonValue, Node, Tree, build};

/// How many members of a container a knob of `t` keeps: strings get `t` bytes, containers one
/// member per 8 (a member costs a few bytes at least, a string byte one), so the two shrink
/// together.
const BYTES_PER_MEMBER: usize = 8;

/// How many levels of nesting a knob of `t` keeps: a level costs two bytes at least (`[]`).
const BYTES_PER_LEVEL: usize = 2;

/// The key of an object's marker member.
const MORE_KEYS: &str = "…";

/// `values` cut so that their compact encodings together take at most `budget` bytes: each
/// value whole when they already fit; `None` when even the harshest cut is over (every
/// container cut to its marker, every string to its marker).
pub fn shrink(values: &[&JsonValue], budget: usize) -> Option<Vec<JsonValue>> {
    let fits = |t: usize| measure(values, Caps::of(t), budget).is_some();
    // Past the longest string and the longest container, nothing is cut.
    let whole = values.iter().map(|value| widest(value)).max().unwrap_or(0);
    let whole = whole.saturating_add(1);
    if fits(whole) {
        return Some(values.iter().map(|value| (*value).clone()).collect());
    }
    if !fits(0) {
        return None;
    }
    // `low` fits and `high` does not.
    let (mut low, mut high) = (0, whole);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if fits(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    let caps = Caps::of(low);
    Some(values.iter().map(|value| build(Shrinking::Of(value, caps, 1))).collect())
}

/// The caps a knob sets.
#[derive(Clone, Copy, Debug)]
struct Caps {
    string_bytes: usize,
    members: usize,
    /// The deepest container kept whole; the outermost (depth 1) always is.
    depth: usize,
}

impl Caps {
    fn of(t: usize) -> Self {
        Self { string_bytes: t, members: t / BYTES_PER_MEMBER, depth: (t / BYTES_PER_LEVEL).max(1) }
    }

    /// Whether a container at `depth` (the outermost is 1) is cut to its marker.
    fn too_deep(self, depth: usize) -> bool {
        depth > self.depth
    }
}

/// The knob at which nothing of `value` is cut: its longest string in bytes, its largest
/// container's member count times [`BYTES_PER_MEMBER`], or its depth times
/// [`BYTES_PER_LEVEL`].
fn widest(value: &JsonValue) -> usize {
    let mut widest = 0usize;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        let width = match value {
            JsonValue::String(text) => text.len(),
            JsonValue::Array(items) => {
                stack.extend(items.iter().map(|item| (item, depth + 1)));
                items.len().saturating_mul(BYTES_PER_MEMBER).max(depth * BYTES_PER_LEVEL)
            }
            JsonValue::Object(members) => {
                stack.extend(members.values().map(|item| (item, depth + 1)));
                members.len().saturating_mul(BYTES_PER_MEMBER).max(depth * BYTES_PER_LEVEL)
            }
            JsonValue::Null | JsonValue::Bool(_) | JsonValue::Number(_) => 0,
        };
        widest = widest.max(width);
    }
    widest
}

/// What a container nested too deep becomes: a string that counts the values it held.
fn too_deep(value: &JsonValue) -> String {
    let mut values = 0usize;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        values += 1;
        match value {
            JsonValue::Array(items) => stack.extend(items.iter()),
            JsonValue::Object(members) => stack.extend(members.values()),
            JsonValue::Null | JsonValue::Bool(_) | JsonValue::Number(_) | JsonValue::String(_) => {}
        }
    }
    format!("…[truncated {values} values]")
}

/// The encoded size of `values` cut by `caps`, or `None` once it is over `budget`.
fn measure(values: &[&JsonValue], caps: Caps, budget: usize) -> Option<usize> {
    let mut total = 0usize;
    let mut stack: Vec<(&JsonValue, usize)> = values.iter().map(|value| (*value, 1)).collect();
    let mut spelling = ryu_js::Buffer::new();
    let add = |total: &mut usize, cost: usize| -> Option<()> {
        *total = total.checked_add(cost).filter(|total| *total <= budget)?;
        Some(())
    };
    while let Some((value, depth)) = stack.pop() {
        let inside = depth + 1;
        match value {
            JsonValue::String(text) => add(&mut total, cut_string(text, caps).len())?,
            JsonValue::Array(_) | JsonValue::Object(_) if caps.too_deep(depth) => {
                add(&mut total, string_len(&too_deep(value)))?;
            }
            JsonValue::Array(items) => {
                let kept = items.len().min(caps.members);
                let marker = (kept < items.len()).then(|| more_items(items.len() - kept));
                let parts = kept + usize::from(marker.is_some());
                let frame = 2 + parts.saturating_sub(1);
                add(&mut total, frame + marker.map_or(0, |marker| string_len(&marker)))?;
                stack.extend(items[..kept].iter().map(|item| (item, inside)));
            }
            JsonValue::Object(members) => {
                let kept = members.len().min(caps.members);
                let marker = object_marker(members.keys().take(kept), members.len() - kept);
                let parts = kept + usize::from(marker.is_some());
                // Braces, commas, and a colon per member.
                let mut frame = 2 + parts.saturating_sub(1) + parts;
                if let Some(marker) = &marker {
                    frame += string_len(MORE_KEYS) + string_len(marker);
                }
                for (key, item) in members.iter().take(kept) {
                    frame = frame.saturating_add(string_len(key));
                    stack.push((item, inside));
                }
                add(&mut total, frame)?;
            }
            JsonValue::Null | JsonValue::Bool(true) => add(&mut total, 4)?,
            JsonValue::Bool(false) => add(&mut total, 5)?,
            JsonValue::Number(number) => {
                add(&mut total, spell_number(&mut spelling, number).len())?
            }
        }
    }
    Some(total)
}

/// What a string becomes under `caps`, as its JSON literal's length or its text.
enum Cut<'a> {
    Whole(&'a str),
    Cut(String),
}

impl Cut<'_> {
    fn len(&self) -> usize {
        match self {
            Cut::Whole(text) => string_len(text),
            Cut::Cut(text) => string_len(text),
        }
    }
}

/// `text` under `caps`: its first `caps.string_bytes` bytes (at a character boundary) and a
/// marker of what was cut, when that is shorter than the whole.
fn cut_string(text: &str, caps: Caps) -> Cut<'_> {
    if text.len() <= caps.string_bytes {
        return Cut::Whole(text);
    }
    let mut end = caps.string_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let removed = text[end..].chars().count();
    let mut cut = String::with_capacity(end + 32);
    cut.push_str(&text[..end]);
    let _ = write!(cut, "…[truncated {removed} chars]");
    if string_len(&cut) < string_len(text) { Cut::Cut(cut) } else { Cut::Whole(text) }
}

/// An array's marker item for `more` items left out.
fn more_items(more: usize) -> String {
    format!("… {more} more items")
}

/// An object's marker value for `more` members left out: `None` when none was, or when a kept
/// member already has the marker's key (the marker would replace it).
fn object_marker<'a>(mut kept: impl Iterator<Item = &'a String>, more: usize) -> Option<String> {
    (more > 0 && !kept.any(|key| key == MORE_KEYS)).then(|| format!("{more} more keys"))
}

/// A node of the cut copy [`build`] makes: a node of the original under the caps, at its depth
/// (the outermost is 1), or a marker.
enum Shrinking<'a> {
    Of(&'a JsonValue, Caps, usize),
    Marker(String),
}

/// A container's members under the caps: the first `kept`, then the marker, if any. `depth` is
/// the members'.
struct Kept<I> {
    members: I,
    left: usize,
    marker: Option<String>,
    caps: Caps,
    depth: usize,
}

impl<'a> Iterator for Kept<std::slice::Iter<'a, JsonValue>> {
    type Item = Shrinking<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left > 0 {
            self.left -= 1;
            if let Some(item) = self.members.next() {
                return Some(Shrinking::Of(item, self.caps, self.depth));
            }
        }
        self.marker.take().map(Shrinking::Marker)
    }
}

impl<'a> Iterator for Kept<indexmap::map::Iter<'a, String, JsonValue>> {
    type Item = (String, Shrinking<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left > 0 {
            self.left -= 1;
            if let Some((key, item)) = self.members.next() {
                return Some((key.clone(), Shrinking::Of(item, self.caps, self.depth)));
            }
        }
        self.marker.take().map(|marker| (MORE_KEYS.to_owned(), Shrinking::Marker(marker)))
    }
}

impl<'a> Tree for Shrinking<'a> {
    type Key = String;
    type Items = Kept<std::slice::Iter<'a, JsonValue>>;
    type Members = Kept<indexmap::map::Iter<'a, String, JsonValue>>;

    fn node(self) -> Node<Self::Items, Self::Members> {
        let (value, caps, depth) = match self {
            Shrinking::Marker(text) => return Node::Flat(JsonValue::String(text)),
            Shrinking::Of(value, caps, depth) => (value, caps, depth),
        };
        let inside = depth + 1;
        match value {
            JsonValue::Array(_) | JsonValue::Object(_) if caps.too_deep(depth) => {
                Node::Flat(JsonValue::String(too_deep(value)))
            }
            JsonValue::String(text) => {
                Node::Flat(JsonValue::String(match cut_string(text, caps) {
                    Cut::Whole(text) => text.to_owned(),
                    Cut::Cut(text) => text,
                }))
            }
            JsonValue::Array(items) => {
                let kept = items.len().min(caps.members);
                let marker = (kept < items.len()).then(|| more_items(items.len() - kept));
                let len = kept + usize::from(marker.is_some());
                let members = items.iter();
                Node::Array(Kept { members, left: kept, marker, caps, depth: inside }, len)
            }
            JsonValue::Object(members) => {
                let kept = members.len().min(caps.members);
                let marker = object_marker(members.keys().take(kept), members.len() - kept);
                let len = kept + usize::from(marker.is_some());
                let members = members.iter();
                Node::Object(Kept { members, left: kept, marker, caps, depth: inside }, len)
            }
            JsonValue::Null | JsonValue::Bool(_) | JsonValue::Number(_) => {
                Node::Flat(value.clone())
            }
        }
    }
}

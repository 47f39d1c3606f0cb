//! A document read into a type: serde does the walking, and an error names the key path of
//! what is wrong (`servers.github.timeoutMs: ...`), whichever rule found it.

use std::fmt;

use code_runtime::JsonValue;
use code_runtime::json;
use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, Unexpected, Visitor};

use crate::FixtureError;

/// `document` as a `T`; `origin` (the file) names it in errors.
///
/// Serde's own messages are kept (`invalid type: integer `1`, expected a string`, `unknown field
/// `x`, expected one of ..`) but never show a string value of the document: the wrong key of a
/// config may hold a secret (a header, a token in a URL), and the key path says where to look.
///
/// # Errors
///
/// A [`FixtureError`] of one line: `origin: path: what`, or `origin: what` for the whole
/// document. A document nesting deeper than serde can walk is one.
pub fn from_document<T: DeserializeOwned>(
    document: &JsonValue,
    origin: &str,
) -> Result<T, FixtureError> {
    let value = document.to_serde_json().map_err(|too_deep| {
        // Where it starts to go deep: the first steps of the path name the key; the rest would
        // be a hundred `[0]`.
        let mut path = too_deep_at(document, too_deep.limit);
        let cut = path.0.len() > SHOWN_STEPS;
        path.0.truncate(SHOWN_STEPS);
        let path = if cut { format!("{path}...") } else { path.to_string() };
        let why = format!("nests deeper than {} levels", too_deep.limit);
        FixtureError::new(KeyPath::root().locate(origin, &format!("{path}: {why}")))
    })?;
    serde_path_to_error::deserialize(value).map_err(|error| {
        let mut path = KeyPath::from(error.path());
        let message = without_strings(&error.into_inner().to_string());
        // Serde's path of an unknown key ends at the key, which its message names: the path
        // told is the object's.
        if message.starts_with("unknown field") {
            path.0.pop();
        }
        FixtureError::new(path.locate(origin, &message))
    })
}

/// How many steps of a too-deep value's path an error shows.
const SHOWN_STEPS: usize = 4;

/// The path of the first container of `document` (in document order) that holds one nested
/// more than `limit` levels below the root: the key the reader should look at. Walked with a
/// stack of its own, as a document of any depth may be.
fn too_deep_at(document: &JsonValue, limit: usize) -> KeyPath {
    let mut stack: Vec<(&JsonValue, KeyPath, usize)> = vec![(document, KeyPath::root(), 0)];
    while let Some((value, path, depth)) = stack.pop() {
        let mut children: Vec<(&JsonValue, KeyPath)> = match value {
            JsonValue::Array(items) => {
                items.iter().enumerate().map(|(index, item)| (item, path.index(index))).collect()
            }
            JsonValue::Object(members) => {
                members.iter().map(|(key, item)| (item, path.key(key))).collect()
            }
            _ => continue,
        };
        if depth >= limit {
            return path;
        }
        // Reversed, so the stack pops them in document order.
        while let Some((child, child_path)) = children.pop() {
            stack.push((child, child_path, depth + 1));
        }
    }
    KeyPath::root()
}

/// Where a value is in a document, written as `jq` does without its leading dot:
/// `mcpServers."brave-search".args[1]`. Keys that are not identifiers are quoted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyPath(Vec<Step>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

impl KeyPath {
    /// The document itself.
    pub fn root() -> Self {
        Self::default()
    }

    /// The value at `key` of the object here.
    #[must_use]
    pub fn key(&self, key: &str) -> Self {
        let mut steps = self.0.clone();
        steps.push(Step::Key(key.to_owned()));
        Self(steps)
    }

    /// The item at `index` of the array here.
    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        let mut steps = self.0.clone();
        steps.push(Step::Index(index));
        Self(steps)
    }

    /// `why` of the value here: `path: why` (`why` alone at the root).
    pub fn invalid(&self, why: impl fmt::Display) -> String {
        if self.0.is_empty() { why.to_string() } else { format!("{self}: {why}") }
    }

    /// `why` of the value here in the document `origin`: `origin: path: why`.
    fn locate(&self, origin: &str, why: &str) -> String {
        format!("{origin}: {}", self.invalid(why))
    }
}

impl From<&serde_path_to_error::Path> for KeyPath {
    fn from(path: &serde_path_to_error::Path) -> Self {
        use serde_path_to_error::Segment;
        Self(
            path.iter()
                .filter_map(|segment| match segment {
                    Segment::Map { key } => Some(Step::Key(key.clone())),
                    Segment::Seq { index } => Some(Step::Index(*index)),
                    // Neither is in a JSON document: enums are read from strings or objects.
                    Segment::Enum { .. } | Segment::Unknown => None,
                })
                .collect(),
        )
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (at, step) in self.0.iter().enumerate() {
            match step {
                Step::Index(index) => write!(f, "[{index}]")?,
                Step::Key(key) => {
                    if at > 0 {
                        f.write_str(".")?;
                    }
                    let plain = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if plain { f.write_str(key)? } else { f.write_str(&json::quote(key))? }
                }
            }
        }
        Ok(())
    }
}

/// A struct read only from a JSON object. Serde's derived `Deserialize` also reads a struct
/// from an array, by position (`[["prog"]]` as `{"command": ["prog"]}`), which no one writing
/// a config means: [`Object`] refuses it.
pub trait ObjectShape: DeserializeOwned {
    /// What the object is, for the error when something else is given: `a server: {..}`.
    const EXPECTED: &'static str;
}

/// A `T` given as a JSON object, never as an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object<T>(pub T);

impl<'de, T: ObjectShape> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor(std::marker::PhantomData)).map(Self)
    }
}

/// Reads a `T` from a map and nothing else.
struct ObjectVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: ObjectShape> Visitor<'de> for ObjectVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTED)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map))
    }
}

/// A whole number of at least 0: a count or a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NonNegative(pub u64);

/// A whole number of at least 1: a timeout, a size that must leave room for something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Positive(pub u64);

/// A string with something in it: a path, a name, an identifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for NonNegative {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_u64(Integer { least: 0 }).map(Self)
    }
}

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_u64(Integer { least: 1 }).map(Self)
    }
}

/// Reads a whole number of at least `least`: JSON's `5.0` is not one.
struct Integer {
    least: u64,
}

impl Visitor<'_> for Integer {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.least == 0 { "a non-negative integer" } else { "a positive integer" })
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<u64, E> {
        if value < self.least {
            return Err(E::invalid_value(Unexpected::Unsigned(value), &self));
        }
        Ok(value)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<u64, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(value), &self)),
        }
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.is_empty() {
            return Err(de::Error::invalid_length(0, &"a non-empty string"));
        }
        Ok(Self(text))
    }
}

/// `message` with each string value serde shows (`string "…"`, Rust's debug quoting) replaced
/// by `a string`.
fn without_strings(message: &str) -> String {
    const SHOWN: &str = "string \"";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(SHOWN) {
        out.push_str(&rest[..at]);
        out.push_str("a string");
        let mut quoted = rest[at + SHOWN.len()..].char_indices();
        let mut end = None;
        while let Some((offset, c)) = quoted.next() {
            match c {
                '\\' => {
                    quoted.next();
                }
                '"' => {
                    end = Some(offset + 1);
                    break;
                }
                _ => {}
            }
        }
        // An unclosed quote cannot come from serde; drop the rest rather than show it.
        let Some(end) = end else { return out };
        rest = &rest[at + SHOWN.len() + end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_as_jq_writes_them() {
        let path = KeyPath::root().key("mcpServers").key("brave-search").key("args").index(1);
        assert_eq!(path.to_string(), r#"mcpServers."brave-search".args[1]"#);
        assert_eq!(KeyPath::root().key("_a1").to_string(), "_a1");
        assert_eq!(KeyPath::root().key("1a").to_string(), r#""1a""#);
        assert_eq!(KeyPath::root().invalid("why"), "why");
        assert_eq!(KeyPath::root().key("a").invalid("why"), "a: why");
    }

    #[test]
    fn numbers_and_texts_say_what_they_expected() {
        let read = |text: &str| -> Result<(NonNegative, Positive, Text), String> {
            let document = code_runtime::json::parse(text).unwrap();
            from_document(&document, "f.json").map_err(|error| error.to_string())
        };
        assert_eq!(read("[0, 1, \"a\"]"), Ok((NonNegative(0), Positive(1), Text("a".into()))));
        for (text, why) in [
            (
                "[-1, 1, \"a\"]",
                "f.json: [0]: invalid value: integer `-1`, expected a non-negative integer",
            ),
            (
                "[0, 0, \"a\"]",
                "f.json: [1]: invalid value: integer `0`, expected a positive integer",
            ),
            (
                "[0, 1.5, \"a\"]",
                "f.json: [1]: invalid type: floating point `1.5`, expected a positive integer",
            ),
            ("[0, 1, \"\"]", "f.json: [2]: invalid length 0, expected a non-empty string"),
            ("[0, 1, 2]", "f.json: [2]: invalid type: integer `2`, expected a string"),
            ("{}", "f.json: invalid type: map, expected a tuple of size 3"),
        ] {
            assert_eq!(read(text).unwrap_err(), why, "{text}");
        }
    }

    #[derive(Debug, PartialEq, Eq, Deserialize)]
    struct Pair {
        a: u8,
        b: u8,
    }

    impl ObjectShape for Pair {
        const EXPECTED: &'static str = "a pair: {\"a\": N, \"b\": N}";
    }

    #[test]
    fn objects_are_never_read_from_arrays() {
        let read = |text: &str| -> Result<Object<Pair>, String> {
            let document = code_runtime::json::parse(text).unwrap();
            from_document(&document, "f.json").map_err(|error| error.to_string())
        };
        assert_eq!(read(r#"{"b": 2, "a": 1}"#), Ok(Object(Pair { a: 1, b: 2 })));
        assert_eq!(
            read("[1, 2]").unwrap_err(),
            r#"f.json: invalid type: sequence, expected a pair: {"a": N, "b": N}"#
        );
        assert_eq!(
            read(r#"{"a": 1, "b": "x"}"#).unwrap_err(),
            "f.json: b: invalid type: a string, expected u8"
        );
    }

    #[test]
    fn a_document_too_deep_for_serde_names_where() {
        let depth = 100_000;
        let text =
            format!(r#"{{"a": 1, "b": {{"c": {}{}}}}}"#, "[".repeat(depth), "]".repeat(depth));
        let document = code_runtime::json::parse(&text).unwrap();
        let error = from_document::<serde_json::Value>(&document, "f.json").unwrap_err();
        assert_eq!(error.to_string(), "f.json: b.c[0][0]...: nests deeper than 128 levels");
    }

    #[test]
    fn string_values_are_never_shown() {
        for (message, shown) in [
            (
                r#"invalid type: string "Bearer s3cret", expected a map"#,
                "invalid type: a string, expected a map",
            ),
            (r#"string "a\"b\\" and string "c""#, "a string and a string"),
            (
                r#"invalid type: integer `1`, expected a string"#,
                "invalid type: integer `1`, expected a string",
            ),
            ("string \"unclosed", "a string"),
        ] {
            assert_eq!(without_strings(message), shown);
        }
    }
}

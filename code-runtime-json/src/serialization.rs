//! [`JsonValue`] in serde's data model: `Serialize`, `Deserialize`, [`from_value`] (a value read
//! as any `Deserialize` type) and [`to_value`] (any `Serialize` type as a value).
//!
//! serde nests one call per level of a value, on whatever stack runs it. So every path here counts
//! levels: `Serialize` hands a container deeper than [`SERDE_DEPTH`] to the serializer as one raw
//! JSON text (written by the iterative encoder; `serde_json` copies it verbatim), and
//! `Deserialize` and [`from_value`] refuse one. [`parse`](crate::parse) reads any depth.

use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use serde::ser::{self, SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Number;

use crate::value::{JsonArray, JsonMap};
use crate::{JsonValue, NumberSpelling, SERDE_DEPTH, encode_with, number_from_f64};

// ---------------------------------------------------------------------------------------------
// Serialize.

impl Serialize for JsonValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Level { value: self, depth: 0 }.serialize(serializer)
    }
}

impl Serialize for JsonArray {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        items(self, 1, serializer)
    }
}

impl Serialize for JsonMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        members(self, 1, serializer)
    }
}

/// A value and the number of containers around it.
struct Level<'a> {
    value: &'a JsonValue,
    depth: usize,
}

impl Serialize for Level<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let depth = self.depth + 1;
        match self.value {
            JsonValue::Null => serializer.serialize_unit(),
            JsonValue::Bool(value) => serializer.serialize_bool(*value),
            JsonValue::Number(number) => number.serialize(serializer),
            JsonValue::String(text) => serializer.serialize_str(text),
            container if depth > SERDE_DEPTH => raw(container, serializer),
            JsonValue::Array(array) => items(array, depth, serializer),
            JsonValue::Object(map) => members(map, depth, serializer),
        }
    }
}

fn items<S: Serializer>(array: &JsonArray, depth: usize, serializer: S) -> Result<S::Ok, S::Error> {
    let mut seq = serializer.serialize_seq(Some(array.len()))?;
    for value in array.iter() {
        seq.serialize_element(&Level { value, depth })?;
    }
    seq.end()
}

fn members<S: Serializer>(map: &JsonMap, depth: usize, serializer: S) -> Result<S::Ok, S::Error> {
    let mut out = serializer.serialize_map(Some(map.len()))?;
    for (key, value) in map.iter() {
        out.serialize_entry(key, &Level { value, depth })?;
    }
    out.end()
}

/// A container too deep for serde's nesting, as one JSON text (exact integers, as `serde_json`
/// writes them): `serde_json`'s serializers copy it verbatim.
fn raw<S: Serializer>(value: &JsonValue, serializer: S) -> Result<S::Ok, S::Error> {
    let mut text = String::new();
    encode_with(value, NumberSpelling::ExactIntegers, &mut text);
    let raw = serde_json::value::RawValue::from_string(text).map_err(ser::Error::custom)?;
    raw.serialize(serializer)
}

// ---------------------------------------------------------------------------------------------
// Deserialize.

impl<'de> Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Building { depth: 0 })
    }
}

/// Builds a value at `depth` containers in.
#[derive(Clone, Copy)]
struct Building {
    depth: usize,
}

impl Building {
    fn inside<E: de::Error>(self) -> Result<Building, E> {
        let depth = self.depth + 1;
        if depth > SERDE_DEPTH {
            return Err(E::custom(format_args!(
                "the value nests more than {SERDE_DEPTH} levels deep (read such text with code_runtime::json::parse)"
            )));
        }
        Ok(Building { depth })
    }
}

impl<'de> DeserializeSeed<'de> for Building {
    type Value = JsonValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<JsonValue, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Building {
    type Value = JsonValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<JsonValue, E> {
        Ok(JsonValue::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<JsonValue, E> {
        Ok(JsonValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<JsonValue, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<JsonValue, E> {
        Ok(JsonValue::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<JsonValue, E> {
        Ok(JsonValue::Number(Number::from(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<JsonValue, E> {
        Ok(JsonValue::Number(Number::from(value)))
    }

    /// Canonical where the double is lossless (`1.0` reads as `1`); `-0` stays, for
    /// [`validate`](crate::validate) to name.
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<JsonValue, E> {
        match number_from_f64(value) {
            Ok(number) => Ok(JsonValue::Number(number)),
            Err(_) => Number::from_f64(value)
                .map(JsonValue::Number)
                .ok_or_else(|| E::custom("a number that is not finite")),
        }
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<JsonValue, E> {
        Ok(JsonValue::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<JsonValue, E> {
        Ok(JsonValue::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonValue, A::Error> {
        let inside = self.inside()?;
        // The hint is the peer's claim; a small cap keeps a lying one from reserving much.
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(inside)? {
            items.push(item);
        }
        Ok(JsonValue::Array(items.into()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonValue, A::Error> {
        let inside = self.inside()?;
        let mut members = JsonMap::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(inside)?;
            members.insert(key, value);
        }
        Ok(JsonValue::Object(members))
    }
}

// ---------------------------------------------------------------------------------------------
// A value read as any type.

/// Why [`from_value`] could not read a value as the type asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FromValueError(String);

impl fmt::Display for FromValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FromValueError {}

impl de::Error for FromValueError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        FromValueError(message.to_string())
    }
}

/// Reads `value` as a `T`, in place: `let query: Query = json::from_value(&args)?`.
///
/// # Errors
///
/// Serde's message when `value` does not have `T`'s shape, or when it nests deeper than
/// [`SERDE_DEPTH`] levels where `T` reads it.
pub fn from_value<T: DeserializeOwned>(value: &JsonValue) -> Result<T, FromValueError> {
    T::deserialize(Reader { value, depth: 0 })
}

/// A value as a serde `Deserializer`, `depth` containers in.
#[derive(Clone, Copy)]
struct Reader<'a> {
    value: &'a JsonValue,
    depth: usize,
}

impl<'a> Reader<'a> {
    fn child(self, value: &'a JsonValue) -> Result<Reader<'a>, FromValueError> {
        let depth = self.depth + 1;
        if depth > SERDE_DEPTH {
            return Err(de::Error::custom(format_args!(
                "the value nests more than {SERDE_DEPTH} levels deep"
            )));
        }
        Ok(Reader { value, depth })
    }

    fn unexpected(&self) -> de::Unexpected<'a> {
        match self.value {
            JsonValue::Null => de::Unexpected::Unit,
            JsonValue::Bool(value) => de::Unexpected::Bool(*value),
            JsonValue::Number(number) => match (number.as_u64(), number.as_i64()) {
                (Some(value), _) => de::Unexpected::Unsigned(value),
                (None, Some(value)) => de::Unexpected::Signed(value),
                _ => de::Unexpected::Float(number.as_f64().unwrap_or(f64::NAN)),
            },
            JsonValue::String(text) => de::Unexpected::Str(text),
            JsonValue::Array(_) => de::Unexpected::Seq,
            JsonValue::Object(_) => de::Unexpected::Map,
        }
    }
}

impl<'de> IntoDeserializer<'de, FromValueError> for Reader<'de> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for Reader<'de> {
    type Error = FromValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FromValueError> {
        match self.value {
            JsonValue::Null => visitor.visit_unit(),
            JsonValue::Bool(value) => visitor.visit_bool(*value),
            JsonValue::Number(number) => match (number.as_u64(), number.as_i64()) {
                (Some(value), _) => visitor.visit_u64(value),
                (None, Some(value)) => visitor.visit_i64(value),
                _ => visitor.visit_f64(number.as_f64().unwrap_or(f64::NAN)),
            },
            JsonValue::String(text) => visitor.visit_borrowed_str(text),
            JsonValue::Array(items) => {
                let mut seq = Items { reader: self, items: items.iter() };
                let value = visitor.visit_seq(&mut seq)?;
                match seq.items.len() {
                    0 => Ok(value),
                    _ => {
                        Err(de::Error::invalid_length(items.len(), &"fewer elements in the array"))
                    }
                }
            }
            JsonValue::Object(members) => {
                visitor.visit_map(Members { reader: self, members: members.iter(), value: None })
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FromValueError> {
        match self.value {
            JsonValue::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, FromValueError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FromValueError> {
        match self.value {
            JsonValue::String(variant) => visitor.visit_enum(variant.as_str().into_deserializer()),
            JsonValue::Object(members) if members.len() == 1 => {
                let Some((variant, value)) = members.iter().next() else {
                    return Err(de::Error::custom("an enum is an object with one member"));
                };
                visitor.visit_enum(Variant { variant, content: self.child(value)? })
            }
            _ => Err(de::Error::invalid_type(
                self.unexpected(),
                &"a string or an object of one member",
            )),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

struct Items<'a> {
    reader: Reader<'a>,
    items: std::slice::Iter<'a, JsonValue>,
}

impl<'de> SeqAccess<'de> for Items<'de> {
    type Error = FromValueError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, FromValueError> {
        match self.items.next() {
            Some(item) => seed.deserialize(self.reader.child(item)?).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Members<'a> {
    reader: Reader<'a>,
    members: indexmap::map::Iter<'a, String, JsonValue>,
    value: Option<&'a JsonValue>,
}

impl<'de> MapAccess<'de> for Members<'de> {
    type Error = FromValueError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, FromValueError> {
        let Some((key, value)) = self.members.next() else { return Ok(None) };
        self.value = Some(value);
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, FromValueError> {
        let Some(value) = self.value.take() else {
            return Err(de::Error::custom("a map value asked for before its key"));
        };
        seed.deserialize(self.reader.child(value)?)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.members.len())
    }
}

/// An enum written as `{"Variant": content}`.
struct Variant<'a> {
    variant: &'a str,
    content: Reader<'a>,
}

impl<'de> EnumAccess<'de> for Variant<'de> {
    type Error = FromValueError;
    type Variant = Reader<'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Reader<'de>), FromValueError> {
        let variant = seed.deserialize(de::value::BorrowedStrDeserializer::new(self.variant))?;
        Ok((variant, self.content))
    }
}

impl<'de> VariantAccess<'de> for Reader<'de> {
    type Error = FromValueError;

    fn unit_variant(self) -> Result<(), FromValueError> {
        match self.value {
            JsonValue::Null => Ok(()),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"a unit variant")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, FromValueError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, FromValueError> {
        self.deserialize_any(visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FromValueError> {
        self.deserialize_any(visitor)
    }
}

// ---------------------------------------------------------------------------------------------
// Any type as a value.

/// `value` as a [`JsonValue`], through its `Serialize` impl: for host types (a struct with
/// `#[derive(Serialize)]`) a binding hands back. Goes through `serde_json`'s value, so the nesting
/// `value`'s type has is the nesting its serialization recurses through.
///
/// # Errors
///
/// `serde_json`'s, for a value it cannot represent (a map whose keys are not strings, say).
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<JsonValue, serde_json::Error> {
    serde_json::to_value(value).map(JsonValue::from)
}

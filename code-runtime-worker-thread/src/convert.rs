//! Values across the bridge: V8 values to lossless [`JsonValue`]s and back, without recursion.
//!
//! A program can replace any global or prototype method, so nothing here calls back into
//! JavaScript to decide what a value is: shapes are read through the V8 API and prototypes are
//! compared with the intrinsics captured when the context was created ([`Intrinsics`]). The only
//! JavaScript that runs during a conversion is a getter the value itself defines, read exactly once.

use std::collections::HashMap;

use code_runtime::json::JsonMap as Map;
use code_runtime::json::{self, JsonValue};

use crate::meter::{Halt, Meter};
use crate::state::Intrinsics;

/// Why a value did not cross.
#[derive(Debug)]
pub(crate) enum Refused {
    /// It is not lossless JSON.
    Lossy,
    /// Its JSON would outgrow the meter, or the run was terminated while it was read.
    Halted(Halt),
}

impl From<Halt> for Refused {
    fn from(halt: Halt) -> Self {
        Refused::Halted(halt)
    }
}

use Refused::Lossy;

/// JSON bytes charged for a value whose text is not built yet: a number's spelling is at most
/// 24 bytes, and `false` is the longest other leaf.
const NUMBER_BYTES: usize = 24;
const LEAF_BYTES: usize = 5;

/// Converts a program value into a detached lossless JSON value, or [`Lossy`].
///
/// Accepted: `null`, booleans, finite numbers other than `-0`, strings without lone surrogates,
/// dense arrays whose prototype is the intrinsic `Array.prototype` and that have no other own
/// properties, and objects whose prototype is `null` or the intrinsic `Object.prototype` and whose
/// own keys are all enumerable strings. Shared references are copied; cycles are refused.
///
/// Every piece is charged to `meter` (in JSON bytes) before it is copied, so a value whose JSON
/// outgrows the meter is refused after copying at most the meter's worth.
pub(crate) fn from_v8<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    intrinsics: &Intrinsics,
    value: v8::Local<'_, v8::Value>,
    meter: &mut Meter<'_>,
) -> Result<JsonValue, Refused> {
    let value = v8::Local::new(scope, value);
    let mut snapshot = Snapshot {
        object_prototype: v8::Local::new(scope, &intrinsics.object_prototype),
        array_prototype: v8::Local::new(scope, &intrinsics.array_prototype),
        stack: Vec::new(),
        path: HashMap::new(),
    };
    snapshot.take(scope, value, meter)
}

/// The state of one conversion: the containers being filled, innermost last, and the ones on the
/// current path by identity hash, for cycle detection (a DAG's shared members are fine; equal
/// hashes are confirmed with `strict_equals`).
struct Snapshot<'s> {
    object_prototype: v8::Local<'s, v8::Object>,
    array_prototype: v8::Local<'s, v8::Object>,
    stack: Vec<Frame<'s>>,
    path: HashMap<i32, Vec<v8::Local<'s, v8::Object>>>,
}

/// A container being filled: the V8 object and what is left to read.
enum Frame<'s> {
    Array { source: v8::Local<'s, v8::Array>, length: u32, next: u32, items: Vec<JsonValue> },
    Object { source: v8::Local<'s, v8::Object>, keys: Vec<String>, next: usize, members: Map },
}

impl Frame<'_> {
    fn into_value(self) -> JsonValue {
        match self {
            Frame::Array { items, .. } => JsonValue::Array(items.into()),
            Frame::Object { members, .. } => JsonValue::Object(members),
        }
    }
}

impl<'s> Snapshot<'s> {
    fn take(
        &mut self,
        scope: &mut v8::PinScope<'s, '_>,
        value: v8::Local<'s, v8::Value>,
        meter: &mut Meter<'_>,
    ) -> Result<JsonValue, Refused> {
        let mut pending = Some(value);
        loop {
            if let Some(value) = pending.take() {
                if let Some(leaf) = self.visit(scope, value, meter)? {
                    if let Some(done) = self.attach(leaf) {
                        return Ok(done);
                    }
                }
            }
            match self.next_slot(scope)? {
                Some(item) => pending = Some(item),
                None => {
                    if let Some(done) = self.close() {
                        return Ok(done);
                    }
                }
            }
        }
    }

    /// A leaf value, or `None` after opening a container for `value`.
    fn visit(
        &mut self,
        scope: &mut v8::PinScope<'s, '_>,
        value: v8::Local<'s, v8::Value>,
        meter: &mut Meter<'_>,
    ) -> Result<Option<JsonValue>, Refused> {
        let leaf = if value.is_null() {
            meter.charge(LEAF_BYTES)?;
            JsonValue::Null
        } else if value.is_boolean() {
            meter.charge(LEAF_BYTES)?;
            JsonValue::Bool(value.is_true())
        } else if value.is_number() {
            meter.charge(NUMBER_BYTES)?;
            let number = value.number_value(scope).ok_or(Lossy)?;
            JsonValue::Number(json::number_from_f64(number).map_err(|_| Lossy)?)
        } else if value.is_string() {
            let string = value.to_string(scope).ok_or(Lossy)?;
            JsonValue::String(metered_string(scope, string, meter)?)
        } else if value.is_array() {
            self.open_array(scope, value.try_into().map_err(|_| Lossy)?, meter)?;
            return Ok(None);
        } else if value.is_object() && !value.is_function() && !value.is_proxy() {
            self.open_object(scope, value.try_into().map_err(|_| Lossy)?, meter)?;
            return Ok(None);
        } else {
            // undefined, bigint, symbol, function, proxy.
            return Err(Lossy);
        };
        Ok(Some(leaf))
    }

    fn open_array(
        &mut self,
        scope: &mut v8::PinScope<'s, '_>,
        array: v8::Local<'s, v8::Array>,
        meter: &mut Meter<'_>,
    ) -> Result<(), Refused> {
        let object: v8::Local<'s, v8::Object> = array.into();
        let prototype = object.get_prototype(scope);
        if prototype.is_none_or(|proto| !proto.strict_equals(self.array_prototype.into())) {
            return Err(Lossy);
        }
        let length = array.length();
        // The brackets and a comma per item, before anything is allocated for the items.
        meter.charge(2 + length as usize)?;
        // The own keys must be exactly the indices `0..length` in order, then `length`: anything
        // else is a hole (possibly "compensated" by an extra key) or a decoration.
        let keys = object.get_own_property_names(scope, all_own_keys()).ok_or(Lossy)?;
        if keys.length() != length.checked_add(1).ok_or(Lossy)? {
            return Err(Lossy);
        }
        for index in 0..length {
            let key = keys.get_index(scope, index).ok_or(Lossy)?;
            if !key.is_number() || key.number_value(scope) != Some(f64::from(index)) {
                return Err(Lossy);
            }
        }
        self.enter(object)?;
        let items = Vec::with_capacity(length as usize);
        self.stack.push(Frame::Array { source: array, length, next: 0, items });
        Ok(())
    }

    fn open_object(
        &mut self,
        scope: &mut v8::PinScope<'s, '_>,
        object: v8::Local<'s, v8::Object>,
        meter: &mut Meter<'_>,
    ) -> Result<(), Refused> {
        let proto = object.get_prototype(scope).ok_or(Lossy)?;
        if !(proto.is_null() || proto.strict_equals(self.object_prototype.into())) {
            return Err(Lossy);
        }
        let all = object.get_own_property_names(scope, all_own_keys()).ok_or(Lossy)?;
        let enumerable =
            object.get_own_property_names(scope, enumerable_string_keys()).ok_or(Lossy)?;
        if all.length() != enumerable.length() {
            return Err(Lossy); // A symbol key or a non-enumerable property.
        }
        // The braces, and per member a colon and a comma.
        meter.charge(2 + 2 * enumerable.length() as usize)?;
        let mut keys = Vec::with_capacity(enumerable.length() as usize);
        for index in 0..enumerable.length() {
            let key = enumerable.get_index(scope, index).ok_or(Lossy)?;
            let key = key.to_string(scope).ok_or(Lossy)?;
            keys.push(metered_string(scope, key, meter)?);
        }
        self.enter(object)?;
        self.stack.push(Frame::Object { source: object, keys, next: 0, members: Map::new() });
        Ok(())
    }

    /// Puts `object` on the current path, refusing a cycle.
    fn enter(&mut self, object: v8::Local<'s, v8::Object>) -> Result<(), Refused> {
        let open = self.path.entry(object.get_identity_hash().get()).or_default();
        if open.iter().any(|other| other.strict_equals(object.into())) {
            return Err(Lossy);
        }
        open.push(object);
        Ok(())
    }

    /// Puts `value` in the innermost container, or hands it back when there is none (it is the
    /// whole result).
    fn attach(&mut self, value: JsonValue) -> Option<JsonValue> {
        match self.stack.last_mut() {
            None => Some(value),
            Some(Frame::Array { items, .. }) => {
                items.push(value);
                None
            }
            Some(Frame::Object { keys, next, members, .. }) => {
                members.insert(std::mem::take(&mut keys[*next - 1]), value);
                None
            }
        }
    }

    /// The next slot of the innermost container, or `None` when it is complete.
    fn next_slot(
        &mut self,
        scope: &mut v8::PinScope<'s, '_>,
    ) -> Result<Option<v8::Local<'s, v8::Value>>, Refused> {
        match self.stack.last_mut() {
            None => Err(Lossy),
            Some(Frame::Array { source, length, next, .. }) => {
                // A getter may shrink the array while it is read: every index below the length
                // seen at the start must still exist.
                if source.length() != *length {
                    return Err(Lossy);
                }
                if *next == *length {
                    return Ok(None);
                }
                let item = source.get_index(scope, *next).ok_or(Lossy)?;
                *next += 1;
                Ok(Some(item))
            }
            Some(Frame::Object { source, keys, next, .. }) => {
                if *next == keys.len() {
                    return Ok(None);
                }
                let key = v8::String::new(scope, &keys[*next]).ok_or(Lossy)?;
                *next += 1;
                Ok(Some(source.get(scope, key.into()).ok_or(Lossy)?))
            }
        }
    }

    /// Closes the innermost container and attaches it to its parent; hands it back when it is
    /// the whole result.
    fn close(&mut self) -> Option<JsonValue> {
        let frame = self.stack.pop()?;
        let source: v8::Local<'s, v8::Object> = match &frame {
            Frame::Array { source, .. } => (*source).into(),
            Frame::Object { source, .. } => *source,
        };
        if let Some(open) = self.path.get_mut(&source.get_identity_hash().get()) {
            open.pop();
        }
        self.attach(frame.into_value())
    }
}

fn all_own_keys() -> v8::GetPropertyNamesArgs {
    v8::GetPropertyNamesArgs {
        mode: v8::KeyCollectionMode::OwnOnly,
        property_filter: v8::PropertyFilter::ALL_PROPERTIES,
        index_filter: v8::IndexFilter::IncludeIndices,
        key_conversion: v8::KeyConversionMode::KeepNumbers,
    }
}

/// Own enumerable string keys, indices included, as strings: what `Object.keys` returns.
pub(crate) fn enumerable_string_keys() -> v8::GetPropertyNamesArgs {
    v8::GetPropertyNamesArgs {
        mode: v8::KeyCollectionMode::OwnOnly,
        property_filter: v8::PropertyFilter::ONLY_ENUMERABLE | v8::PropertyFilter::SKIP_SYMBOLS,
        index_filter: v8::IndexFilter::IncludeIndices,
        key_conversion: v8::KeyConversionMode::ConvertToString,
    }
}

/// A V8 string as a Rust string, charged to `meter` (its UTF-16 length is checked before the
/// copy; its UTF-8 length and quotes are charged after).
fn metered_string(
    scope: &mut v8::PinScope<'_, '_>,
    string: v8::Local<'_, v8::String>,
    meter: &mut Meter<'_>,
) -> Result<String, Refused> {
    if !meter.fits(string.length().saturating_add(2)) {
        return Err(Refused::Halted(Halt::TooLarge));
    }
    let text = string_from_v8(scope, string)?;
    meter.charge(text.len() + 2)?;
    Ok(text)
}

/// A V8 string as a Rust string; a lone surrogate is not lossless (docs/design.md §9.2).
pub(crate) fn string_from_v8(
    scope: &mut v8::PinScope<'_, '_>,
    string: v8::Local<'_, v8::String>,
) -> Result<String, Refused> {
    if string.contains_only_onebyte() {
        // Latin-1 cannot hold a surrogate.
        return Ok(string.to_rust_string_lossy(scope));
    }
    let mut units = vec![0u16; string.length()];
    string.write_v2(scope, 0, &mut units, v8::WriteFlags::empty());
    json::string_from_utf16(&units).map_err(|_| Lossy)
}

/// Builds the V8 value of a lossless JSON value, without recursion. Object members are own data
/// properties (`__proto__` included), never setters, so no program code runs.
pub(crate) fn to_v8<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    value: &JsonValue,
) -> Option<v8::Local<'s, v8::Value>> {
    let mut stack: Vec<Open<'s, '_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            let Some(leaf) = build_leaf(scope, value, &mut stack)? else { continue };
            if attach_built(scope, &mut stack, leaf)? {
                return Some(leaf);
            }
        }
        // Advance the innermost container, or close it.
        match stack.last_mut()? {
            Open::Array(_, items, _) => next = items.next(),
            Open::Object(_, members, key) => {
                next = members.next().map(|(name, member)| {
                    *key = Some(name);
                    member
                });
            }
        }
        if next.is_some() {
            continue;
        }
        let closed: v8::Local<'s, v8::Value> = match stack.pop()? {
            Open::Array(array, ..) => array.into(),
            Open::Object(object, ..) => object.into(),
        };
        if attach_built(scope, &mut stack, closed)? {
            return Some(closed);
        }
    }
}

/// A container [`to_v8`] is filling, with the rest of its source.
enum Open<'s, 'v> {
    Array(v8::Local<'s, v8::Array>, std::slice::Iter<'v, JsonValue>, u32),
    Object(
        v8::Local<'s, v8::Object>,
        <&'v json::JsonMap as IntoIterator>::IntoIter,
        Option<&'v String>,
    ),
}

/// The V8 value of a leaf, or `None` after opening a container for `value`.
fn build_leaf<'s, 'v>(
    scope: &mut v8::PinScope<'s, '_>,
    value: &'v JsonValue,
    stack: &mut Vec<Open<'s, 'v>>,
) -> Option<Option<v8::Local<'s, v8::Value>>> {
    Some(Some(match value {
        JsonValue::Null => v8::null(scope).into(),
        JsonValue::Bool(flag) => v8::Boolean::new(scope, *flag).into(),
        JsonValue::Number(number) => v8::Number::new(scope, number.as_f64()?).into(),
        JsonValue::String(text) => v8::String::new(scope, text)?.into(),
        JsonValue::Array(items) => {
            let array = v8::Array::new(scope, i32::try_from(items.len()).ok()?);
            stack.push(Open::Array(array, items.iter(), 0));
            return Some(None);
        }
        JsonValue::Object(members) => {
            let object = v8::Object::new(scope);
            stack.push(Open::Object(object, members.iter(), None));
            return Some(None);
        }
    }))
}

/// Defines `value` on the innermost open container; `true` when there is none (it is the result).
fn attach_built<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    stack: &mut [Open<'s, '_>],
    value: v8::Local<'s, v8::Value>,
) -> Option<bool> {
    match stack.last_mut() {
        None => return Some(true),
        Some(Open::Array(array, _, index)) => {
            let key = v8::String::new(scope, &index.to_string())?;
            array.create_data_property(scope, key.into(), value)?;
            *index += 1;
        }
        Some(Open::Object(object, _, key)) => {
            let name = v8::String::new(scope, key.take()?)?;
            object.create_data_property(scope, name.into(), value)?;
        }
    }
    Some(false)
}

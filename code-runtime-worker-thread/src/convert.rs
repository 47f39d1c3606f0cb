//! Values across the bridge: V8 values to lossless [`JsonValue`]s and back, without recursion, and
//! the Node-style rendering `console` uses for non-string values.
//!
//! A program can replace any global or prototype method, so nothing here calls back into
//! JavaScript to decide what a value is: shapes are read through the V8 API and prototypes are
//! compared with the intrinsics captured when the context was created ([`Intrinsics`]). The only
//! JavaScript that runs during a conversion is a getter the value itself defines, read exactly once.

use code_runtime::json::{self, JsonValue};
use serde_json::Map;

/// The realm's own prototypes and constructors, captured before the program runs.
pub(crate) struct Intrinsics {
    pub(crate) object_prototype: v8::Global<v8::Object>,
    pub(crate) array_prototype: v8::Global<v8::Object>,
    pub(crate) error: v8::Global<v8::Function>,
}

/// Why a value did not cross.
#[derive(Debug)]
pub(crate) struct Lossy;

/// Converts a program value into a detached lossless JSON value, or [`Lossy`].
///
/// Accepted: `null`, booleans, finite numbers other than `-0`, strings without lone surrogates,
/// dense arrays whose prototype is the intrinsic `Array.prototype` and that have no other own
/// properties, and objects whose prototype is `null` or the intrinsic `Object.prototype` and whose
/// own keys are all enumerable strings. Shared references are copied; cycles are refused.
pub(crate) fn from_v8<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    intrinsics: &Intrinsics,
    value: v8::Local<'_, v8::Value>,
) -> Result<JsonValue, Lossy> {
    let value: v8::Local<'s, v8::Value> = v8::Local::new(scope, value);
    let object_prototype = v8::Local::new(scope, &intrinsics.object_prototype);
    let array_prototype = v8::Local::new(scope, &intrinsics.array_prototype);

    /// A container being filled: the V8 object, its identity, and what is left to read.
    enum Frame<'s> {
        Array {
            source: v8::Local<'s, v8::Array>,
            length: u32,
            next: u32,
            items: Vec<JsonValue>,
        },
        Object {
            source: v8::Local<'s, v8::Object>,
            keys: Vec<String>,
            next: usize,
            members: Map<String, JsonValue>,
        },
    }

    let mut stack: Vec<Frame<'s>> = Vec::new();
    // The containers on the current path by identity hash, for cycle detection (a DAG's shared
    // members are fine). Equal hashes are confirmed with `strict_equals`.
    let mut path: std::collections::HashMap<i32, Vec<v8::Local<'s, v8::Object>>> =
        std::collections::HashMap::new();
    let on_path = |path: &std::collections::HashMap<i32, Vec<v8::Local<'s, v8::Object>>>,
                   object: v8::Local<'s, v8::Object>| {
        path.get(&object.get_identity_hash().get())
            .is_some_and(|open| open.iter().any(|o| o.strict_equals(object.into())))
    };
    let mut pending = Some(value);
    loop {
        // Turn the pending value into a leaf, or open a container for it.
        if let Some(value) = pending.take() {
            let leaf = if value.is_null() {
                Some(JsonValue::Null)
            } else if value.is_boolean() {
                Some(JsonValue::Bool(value.is_true()))
            } else if value.is_number() {
                let number = value.number_value(scope).ok_or(Lossy)?;
                Some(JsonValue::Number(json::number_from_f64(number).map_err(|_| Lossy)?))
            } else if value.is_string() {
                let string = value.to_string(scope).ok_or(Lossy)?;
                Some(JsonValue::String(string_from_v8(scope, string)?))
            } else if value.is_array() {
                let array: v8::Local<'s, v8::Array> = value.try_into().map_err(|_| Lossy)?;
                let object: v8::Local<'s, v8::Object> = array.into();
                if object
                    .get_prototype(scope)
                    .is_none_or(|proto| !proto.strict_equals(array_prototype.into()))
                {
                    return Err(Lossy);
                }
                let length = array.length();
                // The own keys must be exactly the indices `0..length` in order, then `length`:
                // anything else is a hole (possibly "compensated" by an extra key) or a decoration.
                let keys = object.get_own_property_names(scope, all_own_keys()).ok_or(Lossy)?;
                if keys.length() != length + 1 {
                    return Err(Lossy);
                }
                for index in 0..length {
                    let key = keys.get_index(scope, index).ok_or(Lossy)?;
                    if !key.is_number() || key.number_value(scope) != Some(f64::from(index)) {
                        return Err(Lossy);
                    }
                }
                if on_path(&path, object) {
                    return Err(Lossy);
                }
                path.entry(object.get_identity_hash().get()).or_default().push(object);
                stack.push(Frame::Array {
                    source: array,
                    length,
                    next: 0,
                    items: Vec::with_capacity(length as usize),
                });
                None
            } else if value.is_object() && !value.is_function() && !value.is_proxy() {
                let object: v8::Local<'s, v8::Object> = value.try_into().map_err(|_| Lossy)?;
                let proto = object.get_prototype(scope).ok_or(Lossy)?;
                if !(proto.is_null() || proto.strict_equals(object_prototype.into())) {
                    return Err(Lossy);
                }
                let all = object.get_own_property_names(scope, all_own_keys()).ok_or(Lossy)?;
                let enumerable =
                    object.get_own_property_names(scope, enumerable_string_keys()).ok_or(Lossy)?;
                if all.length() != enumerable.length() {
                    return Err(Lossy); // A symbol key or a non-enumerable property.
                }
                let mut keys = Vec::with_capacity(enumerable.length() as usize);
                for index in 0..enumerable.length() {
                    let key = enumerable.get_index(scope, index).ok_or(Lossy)?;
                    let key = key.to_string(scope).ok_or(Lossy)?;
                    keys.push(string_from_v8(scope, key)?);
                }
                if on_path(&path, object) {
                    return Err(Lossy);
                }
                path.entry(object.get_identity_hash().get()).or_default().push(object);
                stack.push(Frame::Object { source: object, keys, next: 0, members: Map::new() });
                None
            } else {
                // undefined, bigint, symbol, function, proxy.
                return Err(Lossy);
            };
            if let Some(leaf) = leaf {
                match stack.last_mut() {
                    None => return Ok(leaf),
                    Some(Frame::Array { items, .. }) => items.push(leaf),
                    Some(Frame::Object { keys, next, members, .. }) => {
                        members.insert(std::mem::take(&mut keys[*next - 1]), leaf);
                    }
                }
            }
        }
        // Read the next slot of the innermost container, or close it.
        let Some(top) = stack.last_mut() else { unreachable!("a container is open") };
        match top {
            Frame::Array { source, length, next, .. } => {
                // A getter may shrink the array while it is read: every index below the length
                // seen at the start must still exist.
                if source.length() != *length {
                    return Err(Lossy);
                }
                if *next < *length {
                    let item = source.get_index(scope, *next).ok_or(Lossy)?;
                    *next += 1;
                    pending = Some(item);
                    continue;
                }
            }
            Frame::Object { source, keys, next, .. } => {
                if *next < keys.len() {
                    let key = v8::String::new(scope, &keys[*next]).ok_or(Lossy)?;
                    *next += 1;
                    let member = source.get(scope, key.into()).ok_or(Lossy)?;
                    pending = Some(member);
                    continue;
                }
            }
        }
        let Some(closed_frame) = stack.pop() else { unreachable!("a container is open") };
        let closed_source: v8::Local<'s, v8::Object> = match &closed_frame {
            Frame::Array { source, .. } => (*source).into(),
            Frame::Object { source, .. } => *source,
        };
        if let Some(open) = path.get_mut(&closed_source.get_identity_hash().get()) {
            open.pop();
        }
        let closed = match closed_frame {
            Frame::Array { items, .. } => JsonValue::Array(items),
            Frame::Object { members, .. } => JsonValue::Object(members),
        };
        match stack.last_mut() {
            None => return Ok(closed),
            Some(Frame::Array { items, .. }) => items.push(closed),
            Some(Frame::Object { keys, next, members, .. }) => {
                members.insert(std::mem::take(&mut keys[*next - 1]), closed);
            }
        }
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

fn enumerable_string_keys() -> v8::GetPropertyNamesArgs {
    v8::GetPropertyNamesArgs {
        mode: v8::KeyCollectionMode::OwnOnly,
        property_filter: v8::PropertyFilter::ONLY_ENUMERABLE | v8::PropertyFilter::SKIP_SYMBOLS,
        index_filter: v8::IndexFilter::IncludeIndices,
        key_conversion: v8::KeyConversionMode::ConvertToString,
    }
}

/// A V8 string as a Rust string; a lone surrogate is not lossless (DESIGN.md §9.2).
pub(crate) fn string_from_v8(
    scope: &mut v8::PinScope<'_, '_>,
    string: v8::Local<'_, v8::String>,
) -> Result<String, Lossy> {
    if string.contains_only_onebyte() {
        // Latin-1 cannot hold a surrogate.
        return Ok(string.to_rust_string_lossy(scope));
    }
    let mut units = vec![0u16; string.length()];
    string.write_v2(scope, 0, &mut units, v8::WriteFlags::empty());
    json::string_from_utf16(&units).map_err(|_| Lossy)
}

/// Builds the V8 value of a lossless JSON value, without recursion. Object members are own data
/// properties (`__proto__` included), never setters.
pub(crate) fn to_v8<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    value: &JsonValue,
) -> Option<v8::Local<'s, v8::Value>> {
    enum Open<'s, 'v> {
        Array(v8::Local<'s, v8::Array>, std::slice::Iter<'v, JsonValue>, u32),
        Object(v8::Local<'s, v8::Object>, serde_json::map::Iter<'v>, Option<&'v String>),
    }
    let mut stack: Vec<Open<'s, '_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            let leaf: v8::Local<'s, v8::Value> = match value {
                JsonValue::Null => v8::null(scope).into(),
                JsonValue::Bool(flag) => v8::Boolean::new(scope, *flag).into(),
                JsonValue::Number(number) => v8::Number::new(scope, number.as_f64()?).into(),
                JsonValue::String(text) => v8::String::new(scope, text)?.into(),
                JsonValue::Array(items) => {
                    let array = v8::Array::new(scope, i32::try_from(items.len()).ok()?);
                    stack.push(Open::Array(array, items.iter(), 0));
                    continue;
                }
                JsonValue::Object(members) => {
                    let object = v8::Object::new(scope);
                    stack.push(Open::Object(object, members.iter(), None));
                    continue;
                }
            };
            // Attach the leaf to the open container, if any.
            match stack.last_mut() {
                None => return Some(leaf),
                Some(Open::Array(array, _, index)) => {
                    let key = v8::String::new(scope, &index.to_string())?;
                    array.create_data_property(scope, key.into(), leaf)?;
                    *index += 1;
                }
                Some(Open::Object(object, _, key)) => {
                    let name = v8::String::new(scope, key.take()?)?;
                    object.create_data_property(scope, name.into(), leaf)?;
                }
            }
        }
        // Advance the innermost container.
        match stack.last_mut()? {
            Open::Array(_, items, _) => {
                if let Some(item) = items.next() {
                    next = Some(item);
                    continue;
                }
            }
            Open::Object(_, members, key) => {
                if let Some((name, member)) = members.next() {
                    *key = Some(name);
                    next = Some(member);
                    continue;
                }
            }
        }
        let closed: v8::Local<'s, v8::Value> = match stack.pop()? {
            Open::Array(array, ..) => array.into(),
            Open::Object(object, ..) => object.into(),
        };
        match stack.last_mut() {
            None => return Some(closed),
            Some(Open::Array(array, _, index)) => {
                let key = v8::String::new(scope, &index.to_string())?;
                array.create_data_property(scope, key.into(), closed)?;
                *index += 1;
            }
            Some(Open::Object(object, _, key)) => {
                let name = v8::String::new(scope, key.take()?)?;
                object.create_data_property(scope, name.into(), closed)?;
            }
        }
    }
}

/// Renders one `console` argument the way Node's `util.inspect` does for common values: strings
/// verbatim at the top level, `{ x: 1 }`, `[ 1, 2 ]`, depth 4, at most 100 items per container.
/// Reads only own enumerable properties through the V8 API; never calls program code except
/// getters.
pub(crate) fn inspect(scope: &mut v8::PinScope<'_, '_>, value: v8::Local<'_, v8::Value>) -> String {
    let mut out = String::new();
    inspect_into(scope, value, 0, true, &mut out);
    out
}

const MAX_DEPTH: usize = 4;
const MAX_ITEMS: u32 = 100;

// Depth is capped at `MAX_DEPTH`, so this recursion is bounded (five levels).
fn inspect_into(
    scope: &mut v8::PinScope<'_, '_>,
    value: v8::Local<'_, v8::Value>,
    depth: usize,
    top: bool,
    out: &mut String,
) {
    if value.is_string() {
        let text = value.to_rust_string_lossy(scope);
        if top {
            out.push_str(&text);
        } else {
            out.push('\'');
            out.push_str(&text.replace('\\', "\\\\").replace('\'', "\\'").replace('\n', "\\n"));
            out.push('\'');
        }
    } else if value.is_undefined() {
        out.push_str("undefined");
    } else if value.is_null() {
        out.push_str("null");
    } else if value.is_number() {
        let number = value.number_value(scope).unwrap_or(f64::NAN);
        out.push_str(&number_spelling(number));
    } else if value.is_big_int() {
        out.push_str(&value.to_rust_string_lossy(scope));
        out.push('n');
    } else if value.is_boolean() || value.is_symbol() {
        let text = value.to_string(scope).map(|s| s.to_rust_string_lossy(scope));
        out.push_str(text.as_deref().unwrap_or("Symbol()"));
    } else if value.is_function() {
        let function: v8::Local<'_, v8::Function> = value.try_into().expect("checked is_function");
        let name = function.get_name(scope).to_rust_string_lossy(scope);
        if name.is_empty() {
            out.push_str("[Function (anonymous)]");
        } else {
            out.push_str(&format!("[Function: {name}]"));
        }
    } else if value.is_native_error() {
        let object: v8::Local<'_, v8::Object> = value.try_into().expect("checked is_native_error");
        let key = v8::String::new(scope, "stack").expect("short string");
        let stack = object.get(scope, key.into()).filter(|stack| stack.is_string());
        let text = stack
            .or_else(|| value.to_string(scope).map(Into::into))
            .map(|s| s.to_rust_string_lossy(scope));
        out.push_str(text.as_deref().unwrap_or("Error"));
    } else if value.is_array() {
        let array: v8::Local<'_, v8::Array> = value.try_into().expect("checked is_array");
        if depth >= MAX_DEPTH {
            out.push_str("[Array]");
            return;
        }
        let length = array.length();
        if length == 0 {
            out.push_str("[]");
            return;
        }
        out.push_str("[ ");
        for index in 0..length.min(MAX_ITEMS) {
            if index > 0 {
                out.push_str(", ");
            }
            match array.get_index(scope, index) {
                Some(item) => inspect_into(scope, item, depth + 1, false, out),
                None => out.push_str("<error>"),
            }
        }
        if length > MAX_ITEMS {
            out.push_str(&format!(
                ", ... {} more item{}",
                length - MAX_ITEMS,
                if length - MAX_ITEMS == 1 { "" } else { "s" }
            ));
        }
        out.push_str(" ]");
    } else if value.is_object() {
        let object: v8::Local<'_, v8::Object> = value.try_into().expect("checked is_object");
        if depth >= MAX_DEPTH {
            out.push_str("[Object]");
            return;
        }
        let Some(keys) = object.get_own_property_names(scope, enumerable_string_keys()) else {
            out.push_str("{}");
            return;
        };
        if keys.length() == 0 {
            out.push_str("{}");
            return;
        }
        out.push_str("{ ");
        for index in 0..keys.length().min(MAX_ITEMS) {
            if index > 0 {
                out.push_str(", ");
            }
            let Some(key) = keys.get_index(scope, index) else { continue };
            let name = key.to_rust_string_lossy(scope);
            if crate::bridge::is_plain_identifier(&name) {
                out.push_str(&name);
            } else {
                out.push('\'');
                out.push_str(&name.replace('\'', "\\'"));
                out.push('\'');
            }
            out.push_str(": ");
            match object.get(scope, key) {
                Some(member) => inspect_into(scope, member, depth + 1, false, out),
                None => out.push_str("<error>"),
            }
        }
        if keys.length() > MAX_ITEMS {
            out.push_str(&format!(
                ", ... {} more item{}",
                keys.length() - MAX_ITEMS,
                if keys.length() - MAX_ITEMS == 1 { "" } else { "s" }
            ));
        }
        out.push_str(" }");
    } else {
        out.push_str(&value.to_rust_string_lossy(scope));
    }
}

/// ECMAScript `Number::toString`, with `-0` as Node prints it.
fn number_spelling(number: f64) -> String {
    if number == 0.0 && number.is_sign_negative() {
        return "-0".to_owned();
    }
    if number.is_nan() {
        return "NaN".to_owned();
    }
    if number.is_infinite() {
        return if number > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    ryu_js::Buffer::new().format(number).to_owned()
}

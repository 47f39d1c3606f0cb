//! Program values as text: `console` arguments rendered the way Node's `util.inspect` renders
//! common values, and thrown values rendered as the run's exception message (REFERENCE.md §3.9).
//!
//! Both read shapes through the V8 API against the intrinsics; the only program code they run is
//! a getter on the value itself (and, for an error, its `stack` and `message`).

use code_runtime::provider::catalogue;

use crate::convert::enumerable_string_keys;
use crate::state::Intrinsics;

/// Containers deeper than this print as `[Object]` / `[Array]`, as Node's default does.
const MAX_DEPTH: usize = 4;
/// Items shown per container before `... N more items`, as Node's default does.
const MAX_ITEMS: u32 = 100;

/// Renders one `console` argument: strings verbatim at the top level, `{ x: 1 }`, `[ 1, 2 ]`,
/// depth 4, at most 100 items per container.
pub(crate) fn inspect(scope: &mut v8::PinScope<'_, '_>, value: v8::Local<'_, v8::Value>) -> String {
    let mut out = String::new();
    inspect_into(scope, value, 0, true, &mut out);
    out
}

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
        out.push_str(&number_spelling(value.number_value(scope).unwrap_or(f64::NAN)));
    } else if value.is_big_int() {
        out.push_str(&value.to_rust_string_lossy(scope));
        out.push('n');
    } else if value.is_boolean() || value.is_symbol() {
        let text = value.to_string(scope).map(|s| s.to_rust_string_lossy(scope));
        out.push_str(text.as_deref().unwrap_or("Symbol()"));
    } else if let Ok(function) = v8::Local::<v8::Function>::try_from(value) {
        let name = function.get_name(scope).to_rust_string_lossy(scope);
        if name.is_empty() {
            out.push_str("[Function (anonymous)]");
        } else {
            out.push_str(&format!("[Function: {name}]"));
        }
    } else if value.is_native_error() {
        inspect_error(scope, value, out);
    } else if let Ok(array) = v8::Local::<v8::Array>::try_from(value) {
        inspect_array(scope, array, depth, out);
    } else if let Ok(object) = v8::Local::<v8::Object>::try_from(value) {
        inspect_object(scope, object, depth, out);
    } else {
        out.push_str(&value.to_rust_string_lossy(scope));
    }
}

fn inspect_error(
    scope: &mut v8::PinScope<'_, '_>,
    value: v8::Local<'_, v8::Value>,
    out: &mut String,
) {
    let stack = value.to_object(scope).and_then(|object| {
        let key = v8::String::new(scope, "stack")?;
        object.get(scope, key.into()).filter(|stack| stack.is_string())
    });
    let text = stack
        .or_else(|| value.to_string(scope).map(Into::into))
        .map(|s| s.to_rust_string_lossy(scope));
    out.push_str(text.as_deref().unwrap_or("Error"));
}

fn inspect_array(
    scope: &mut v8::PinScope<'_, '_>,
    array: v8::Local<'_, v8::Array>,
    depth: usize,
    out: &mut String,
) {
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
    more_items(length, out);
    out.push_str(" ]");
}

fn inspect_object(
    scope: &mut v8::PinScope<'_, '_>,
    object: v8::Local<'_, v8::Object>,
    depth: usize,
    out: &mut String,
) {
    if depth >= MAX_DEPTH {
        out.push_str("[Object]");
        return;
    }
    let keys = object.get_own_property_names(scope, enumerable_string_keys());
    let Some(keys) = keys.filter(|keys| keys.length() > 0) else {
        out.push_str("{}");
        return;
    };
    out.push_str("{ ");
    for index in 0..keys.length().min(MAX_ITEMS) {
        if index > 0 {
            out.push_str(", ");
        }
        let Some(key) = keys.get_index(scope, index) else { continue };
        let name = key.to_rust_string_lossy(scope);
        if is_plain_identifier(&name) {
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
    more_items(keys.length(), out);
    out.push_str(" }");
}

fn more_items(count: u32, out: &mut String) {
    if count > MAX_ITEMS {
        let more = count - MAX_ITEMS;
        out.push_str(&format!(", ... {more} more item{}", if more == 1 { "" } else { "s" }));
    }
}

/// Whether `name` prints without quotes as an object key (Node's rule, ASCII only).
fn is_plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
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

/// The message of a thrown value (REFERENCE.md §3.9): an `Error` of this realm gives its `stack`
/// (or its `message`), anything else `String(value)`; if rendering throws, the catalogue's
/// unrenderable text.
pub(crate) fn exception(
    scope: &mut v8::PinScope<'_, '_>,
    intrinsics: &Intrinsics,
    value: v8::Local<'_, v8::Value>,
) -> String {
    v8::tc_scope!(let tc, scope);
    let rendered = if is_error(tc, intrinsics, value) {
        error_text(tc, value)
    } else {
        value.to_string(tc).map(|s| s.to_rust_string_lossy(tc))
    };
    match rendered {
        Some(text) if !tc.has_caught() => text,
        _ => catalogue::UNRENDERABLE_EXCEPTION.to_owned(),
    }
}

/// Whether `value`'s prototype chain holds the intrinsic `Error.prototype`: the program may have
/// replaced `Error`, `instanceof` and `Symbol.hasInstance`, so the chain is walked by hand.
fn is_error(
    scope: &mut v8::PinScope<'_, '_>,
    intrinsics: &Intrinsics,
    value: v8::Local<'_, v8::Value>,
) -> bool {
    /// A chain longer than this is not an error a program meant to throw; proxies can make it
    /// endless.
    const MAX_CHAIN: usize = 10_000;
    let error = v8::Local::new(scope, &intrinsics.error);
    let Some(key) = v8::String::new(scope, "prototype") else { return false };
    let Some(error_prototype) = error.get(scope, key.into()) else { return false };
    let Some(object) = value.to_object(scope).filter(|_| value.is_object()) else { return false };
    let mut current = object.get_prototype(scope);
    for _ in 0..MAX_CHAIN {
        let Some(prototype) = current.filter(|p| !p.is_null()) else { return false };
        if prototype.strict_equals(error_prototype) {
            return true;
        }
        current = prototype.to_object(scope).and_then(|p| p.get_prototype(scope));
    }
    false
}

/// An error's `stack`, or its `message` when the stack is missing.
fn error_text(scope: &mut v8::PinScope<'_, '_>, value: v8::Local<'_, v8::Value>) -> Option<String> {
    let object = value.to_object(scope)?;
    let stack_key = v8::String::new(scope, "stack")?;
    match object.get(scope, stack_key.into()) {
        Some(stack) if !stack.is_null_or_undefined() => {
            stack.to_string(scope).map(|s| s.to_rust_string_lossy(scope))
        }
        _ => {
            let message_key = v8::String::new(scope, "message")?;
            let message = object.get(scope, message_key.into())?;
            message.to_string(scope).map(|s| s.to_rust_string_lossy(scope))
        }
    }
}

//! Program values as text: `console` arguments rendered the way Node's `util.inspect` renders
//! common values, and thrown values rendered as the run's exception message (docs/reference.md §3.9).
//!
//! Both read shapes through the V8 API against the intrinsics; the only program code they run is
//! a getter on the value itself (and, for an error, its `stack` and `message`).

use code_runtime::provider::catalogue;

use crate::convert::enumerable_string_keys;
use crate::meter::{Halt, Meter};
use crate::state::Intrinsics;

/// Containers nested this deep print as `[Object]` / `[Array]` (Node's default prints them from
/// depth 2; logs of programs that return data read better with more).
const MAX_DEPTH: usize = 4;
/// Items shown per container before `... N more items`, as Node's default does.
const MAX_ITEMS: u32 = 100;

/// Renders one `console` argument into `out`: strings verbatim at the top level, `{ x: 1 }`,
/// `[ 1, 2 ]`, depth 4, at most 100 items per container; every piece charged to `meter` before
/// it is copied.
pub(crate) fn inspect(
    scope: &mut v8::PinScope<'_, '_>,
    value: v8::Local<'_, v8::Value>,
    meter: &mut Meter<'_>,
    out: &mut String,
) -> Result<(), Halt> {
    Text { meter, out }.inspect(scope, value, 0, true)
}

/// Text being rendered under a meter.
struct Text<'m, 'r> {
    meter: &'m mut Meter<'r>,
    out: &'m mut String,
}

impl Text<'_, '_> {
    fn push(&mut self, text: &str) -> Result<(), Halt> {
        self.meter.charge(text.len())?;
        self.out.push_str(text);
        Ok(())
    }

    /// A V8 string's text, if it fits what is left (its UTF-16 length is checked before the
    /// copy: its UTF-8 is never shorter).
    fn copy(
        &mut self,
        scope: &mut v8::PinScope<'_, '_>,
        string: v8::Local<'_, v8::String>,
    ) -> Result<String, Halt> {
        if !self.meter.fits(string.length()) {
            return Err(Halt::TooLarge);
        }
        Ok(string.to_rust_string_lossy(scope))
    }

    fn push_string(
        &mut self,
        scope: &mut v8::PinScope<'_, '_>,
        string: v8::Local<'_, v8::String>,
    ) -> Result<(), Halt> {
        let text = self.copy(scope, string)?;
        self.push(&text)
    }

    // Depth is capped at `MAX_DEPTH`, so this recursion is bounded (five levels).
    fn inspect(
        &mut self,
        scope: &mut v8::PinScope<'_, '_>,
        value: v8::Local<'_, v8::Value>,
        depth: usize,
        top: bool,
    ) -> Result<(), Halt> {
        if let (true, Ok(string)) = (value.is_string(), v8::Local::<v8::String>::try_from(value)) {
            if top {
                return self.push_string(scope, string);
            }
            let text = self.copy(scope, string)?;
            let quoted = text.replace('\\', "\\\\").replace('\'', "\\'").replace('\n', "\\n");
            return self.push(&format!("'{quoted}'"));
        }
        if value.is_undefined() {
            self.push("undefined")
        } else if value.is_null() {
            self.push("null")
        } else if value.is_number() {
            self.push(&number_spelling(value.number_value(scope).unwrap_or(f64::NAN)))
        } else if value.is_big_int() || value.is_boolean() || value.is_symbol() {
            match value.to_string(scope) {
                Some(text) => self.push_string(scope, text)?,
                None => self.push("Symbol()")?,
            }
            if value.is_big_int() { self.push("n") } else { Ok(()) }
        } else if let Ok(function) = v8::Local::<v8::Function>::try_from(value) {
            let name = function.get_name(scope);
            let name = self.copy(scope, name)?;
            if name.is_empty() {
                self.push("[Function (anonymous)]")
            } else {
                self.push(&format!("[Function: {name}]"))
            }
        } else if value.is_native_error() {
            self.error(scope, value)
        } else if let Ok(array) = v8::Local::<v8::Array>::try_from(value) {
            self.array(scope, array, depth)
        } else if let Ok(object) = v8::Local::<v8::Object>::try_from(value) {
            self.object(scope, object, depth)
        } else {
            match value.to_string(scope) {
                Some(text) => self.push_string(scope, text),
                None => Ok(()),
            }
        }
    }

    fn error(
        &mut self,
        scope: &mut v8::PinScope<'_, '_>,
        value: v8::Local<'_, v8::Value>,
    ) -> Result<(), Halt> {
        let stack = value.to_object(scope).and_then(|object| {
            let key = v8::String::new(scope, "stack")?;
            object.get(scope, key.into()).filter(|stack| stack.is_string())
        });
        match stack.and_then(|stack| stack.to_string(scope)).or_else(|| value.to_string(scope)) {
            Some(text) => self.push_string(scope, text),
            None => self.push("Error"),
        }
    }

    fn array(
        &mut self,
        scope: &mut v8::PinScope<'_, '_>,
        array: v8::Local<'_, v8::Array>,
        depth: usize,
    ) -> Result<(), Halt> {
        if depth >= MAX_DEPTH {
            return self.push("[Array]");
        }
        let length = array.length();
        if length == 0 {
            return self.push("[]");
        }
        self.push("[ ")?;
        for index in 0..length.min(MAX_ITEMS) {
            if index > 0 {
                self.push(", ")?;
            }
            match array.get_index(scope, index) {
                Some(item) => self.inspect(scope, item, depth + 1, false)?,
                None => self.push("<error>")?,
            }
        }
        self.push(&more_items(length))?;
        self.push(" ]")
    }

    fn object(
        &mut self,
        scope: &mut v8::PinScope<'_, '_>,
        object: v8::Local<'_, v8::Object>,
        depth: usize,
    ) -> Result<(), Halt> {
        if depth >= MAX_DEPTH {
            return self.push("[Object]");
        }
        let keys = object.get_own_property_names(scope, enumerable_string_keys());
        let Some(keys) = keys.filter(|keys| keys.length() > 0) else {
            return self.push("{}");
        };
        self.push("{ ")?;
        for index in 0..keys.length().min(MAX_ITEMS) {
            if index > 0 {
                self.push(", ")?;
            }
            let Some(key) = keys.get_index(scope, index) else { continue };
            let Some(key_text) = key.to_string(scope) else { continue };
            let name = self.copy(scope, key_text)?;
            if is_plain_identifier(&name) {
                self.push(&name)?;
            } else {
                self.push(&format!("'{}'", name.replace('\'', "\\'")))?;
            }
            self.push(": ")?;
            match object.get(scope, key) {
                Some(member) => self.inspect(scope, member, depth + 1, false)?,
                None => self.push("<error>")?,
            }
        }
        self.push(&more_items(keys.length()))?;
        self.push(" }")
    }
}

fn more_items(count: u32) -> String {
    if count <= MAX_ITEMS {
        return String::new();
    }
    let more = count - MAX_ITEMS;
    format!(", ... {more} more item{}", if more == 1 { "" } else { "s" })
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

/// The message of a thrown value (docs/reference.md §3.9): an `Error` of this realm gives its `stack`
/// (or its `message`), anything else `String(value)`; if rendering throws, the catalogue's
/// unrenderable text. The text is charged to `meter`; the program's getters and `toString` run
/// under the run's deadlines like any other program code.
pub(crate) fn exception(
    scope: &mut v8::PinScope<'_, '_>,
    intrinsics: &Intrinsics,
    value: v8::Local<'_, v8::Value>,
    meter: &mut Meter<'_>,
) -> Result<String, Halt> {
    v8::tc_scope!(let tc, scope);
    let rendered =
        if is_error(tc, intrinsics, value) { error_text(tc, value) } else { value.to_string(tc) };
    if tc.is_execution_terminating() {
        return Err(Halt::Terminated);
    }
    match rendered {
        Some(text) if !tc.has_caught() => {
            let mut out = String::new();
            Text { meter, out: &mut out }.push_string(tc, text)?;
            Ok(out)
        }
        _ => Ok(catalogue::UNRENDERABLE_EXCEPTION.to_owned()),
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
fn error_text<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    value: v8::Local<'_, v8::Value>,
) -> Option<v8::Local<'s, v8::String>> {
    let object = value.to_object(scope)?;
    let stack_key = v8::String::new(scope, "stack")?;
    match object.get(scope, stack_key.into()) {
        Some(stack) if !stack.is_null_or_undefined() => stack.to_string(scope),
        _ => {
            let message_key = v8::String::new(scope, "message")?;
            let message = object.get(scope, message_key.into())?;
            message.to_string(scope)
        }
    }
}

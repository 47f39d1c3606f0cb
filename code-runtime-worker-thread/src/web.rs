//! The web platform's common globals without I/O (`web.js`; [`NAMES`]) and the natives under
//! them. A run pays for them only once its program first touches one: `builtins.rs` defines each
//! name as an accessor that calls [`load`], which compiles `web.js` and hands it these natives.
//!
//! The natives never allocate program-visible memory themselves: a byte array is made by the
//! JavaScript side (`new Uint8Array(n)`, which the run's allocator meters and which fails as a
//! `RangeError`), and the natives read or fill it; text they copy is charged to the run's memory
//! while they hold it (`Held`).

use std::sync::{Arc, Mutex, PoisonError};

use crate::native::{throw, write_into};
use crate::{crypto, encoding, state};

/// The names `web.js` defines, which `builtins.rs` makes lazy.
pub(crate) const NAMES: [&str; 19] = [
    "URL",
    "URLSearchParams",
    "DOMException",
    "Event",
    "CustomEvent",
    "EventTarget",
    "AbortController",
    "AbortSignal",
    "atob",
    "btoa",
    "TextEncoder",
    "TextDecoder",
    "setInterval",
    "clearInterval",
    "queueMicrotask",
    "structuredClone",
    "navigator",
    "CryptoKey",
    "SubtleCrypto",
];

const WEB: &str = include_str!("web.js");

/// `navigator.userAgent`.
const USER_AGENT: &str = concat!("code-runtime/", env!("CARGO_PKG_VERSION"));

/// `load()`: `web.js`'s function and the natives it takes, as `[function, natives]`.
pub(crate) fn load(
    scope: &mut v8::PinScope<'_, '_>,
    _args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(loaded) = compiled(scope) else { return };
    rv.set(loaded.into());
}

fn compiled<'s>(scope: &mut v8::PinScope<'s, '_>) -> Option<v8::Local<'s, v8::Array>> {
    let source = v8::String::new(scope, WEB)?;
    let name = v8::String::new(scope, "web")?;
    let origin =
        v8::ScriptOrigin::new(scope, name.into(), 0, 0, false, 0, None, false, false, false, None);
    let function = script(scope, source, &origin)?.run(scope)?;
    let natives = v8::Object::new(scope);
    let callbacks: [(&str, v8::Local<'s, v8::Function>); 17] = [
        ("urlParse", v8::Function::new(scope, url_parse)?),
        ("urlSet", v8::Function::new(scope, url_set)?),
        ("formParse", v8::Function::new(scope, form_parse)?),
        ("formSerialize", v8::Function::new(scope, form_serialize)?),
        ("now", v8::Function::new(scope, since_start)?),
        ("utf8Length", v8::Function::new(scope, utf8_length)?),
        ("encodeInto", v8::Function::new(scope, encode_into)?),
        ("decode", v8::Function::new(scope, decode)?),
        ("complete", v8::Function::new(scope, complete)?),
        ("enqueue", v8::Function::new(scope, enqueue)?),
        ("kind", v8::Function::new(scope, kind)?),
        ("cloneDone", v8::Function::new(scope, clone_done)?),
        ("encoding", v8::Function::new(scope, encoding::encoding)?),
        ("decodeAs", v8::Function::new(scope, encoding::decode_as)?),
        ("digest", v8::Function::new(scope, crypto::digest)?),
        ("hmac", v8::Function::new(scope, crypto::hmac)?),
        ("hmacVerify", v8::Function::new(scope, crypto::hmac_verify)?),
    ];
    for (key, value) in callbacks {
        let key = v8::String::new(scope, key)?;
        natives.create_data_property(scope, key.into(), value.into())?;
    }
    let key = v8::String::new(scope, "userAgent")?;
    let agent = v8::String::new(scope, USER_AGENT)?;
    natives.create_data_property(scope, key.into(), agent.into())?;
    Some(v8::Array::new_with_elements(scope, &[function, natives.into()]))
}

/// What this process has of `web.js`'s compilation. The whole script is one parenthesised
/// function, which V8 compiles eagerly (about a millisecond); from the third run on that
/// touches it, V8's code cache of it, made by the second (a cell serves one run: it never makes
/// one, which would cost it the making and save it nothing).
enum CodeCache {
    Unused,
    UsedOnce,
    Made(Arc<[u8]>),
}

static CODE_CACHE: Mutex<CodeCache> = Mutex::new(CodeCache::Unused);

/// `web.js` compiled, from this process's code cache of it when there is one.
fn script<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    source: v8::Local<'s, v8::String>,
    origin: &v8::ScriptOrigin<'s>,
) -> Option<v8::Local<'s, v8::Script>> {
    let cached = {
        let mut cache = CODE_CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cache {
            CodeCache::Made(bytes) => Some(bytes.clone()),
            CodeCache::UsedOnce => None,
            CodeCache::Unused => {
                *cache = CodeCache::UsedOnce;
                drop(cache);
                return v8::Script::compile(scope, source, Some(origin));
            }
        }
    };
    let Some(bytes) = cached else {
        let script = v8::Script::compile(scope, source, Some(origin))?;
        if let Some(made) = script.get_unbound_script(scope).create_code_cache() {
            *CODE_CACHE.lock().unwrap_or_else(PoisonError::into_inner) =
                CodeCache::Made(Arc::from(&made[..]));
        }
        return Some(script);
    };
    // A cache V8 rejects (another V8's, other flags) is ignored: it compiles the source.
    let mut source = v8::script_compiler::Source::new_with_cached_data(
        source,
        Some(origin),
        v8::CachedData::new(&bytes),
    );
    v8::script_compiler::compile(
        scope,
        &mut source,
        v8::script_compiler::CompileOptions::ConsumeCodeCache,
        v8::script_compiler::NoCacheReason::NoReason,
    )
}

/// `performance.now()`: milliseconds since the run started, from its clock (also
/// `Event.timeStamp`; `builtins.rs` installs it).
pub(crate) fn since_start(
    scope: &mut v8::PinScope<'_, '_>,
    _args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(run) = state::of(scope) else { return };
    rv.set(v8::Number::new(scope, run.entropy.since_start_ms()).into());
}

/// `utf8Length(string)`: the bytes of its UTF-8 (a lone surrogate counts as U+FFFD's three).
fn utf8_length(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Ok(text) = v8::Local::<v8::String>::try_from(args.get(0)) else {
        return throw(scope, "utf8Length: not a string", false);
    };
    let length = text.utf8_length(scope);
    rv.set(v8::Number::new(scope, length as f64).into());
}

/// `encodeInto(string, bytes)`: as much of the string's UTF-8 as fits in `bytes` (whole
/// characters; lone surrogates as U+FFFD), `[read, written]` (read in UTF-16 code units).
fn encode_into(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let (Ok(text), Ok(bytes)) = (
        v8::Local::<v8::String>::try_from(args.get(0)),
        v8::Local::<v8::Uint8Array>::try_from(args.get(1)),
    ) else {
        return throw(scope, "encodeInto: not a string and a Uint8Array", false);
    };
    let mut read = 0usize;
    let written = write_into(scope, bytes, |scope, target| {
        text.write_utf8_v2(scope, target, v8::WriteFlags::kReplaceInvalidUtf8, Some(&mut read))
    })
    .unwrap_or(0);
    let pair =
        [v8::Number::new(scope, read as f64).into(), v8::Number::new(scope, written as f64).into()];
    rv.set(v8::Array::new_with_elements(scope, &pair).into());
}

/// `decode(bytes, fatal)`: the UTF-8 `bytes` as a string, malformed sequences replaced by
/// U+FFFD, or `null` when `fatal` and there is one.
fn decode(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Ok(bytes) = v8::Local::<v8::Uint8Array>::try_from(args.get(0)) else {
        return throw(scope, "decode: not a Uint8Array", false);
    };
    let fatal = args.get(1).boolean_value(scope);
    let mut storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let contents = bytes.get_contents(&mut storage);
    let text = if fatal {
        match std::str::from_utf8(contents) {
            Ok(text) => {
                v8::String::new_from_utf8(scope, text.as_bytes(), v8::NewStringType::Normal)
            }
            Err(_) => return rv.set(v8::null(scope).into()),
        }
    } else {
        // V8 replaces malformed UTF-8 as the Encoding Standard does (maximal subparts).
        v8::String::new_from_utf8(scope, contents, v8::NewStringType::Normal)
    };
    match text {
        Some(text) => rv.set(text.into()),
        None => throw(scope, "decode: the text is longer than a string can be", true),
    }
}

/// `complete(bytes)`: where the character the bytes end in begins when they do not finish it
/// (a stream's next chunk does); their length otherwise.
fn complete(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Ok(bytes) = v8::Local::<v8::Uint8Array>::try_from(args.get(0)) else {
        return throw(scope, "complete: not a Uint8Array", false);
    };
    let mut storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let end = unfinished(bytes.get_contents(&mut storage));
    rv.set(v8::Number::new(scope, end as f64).into());
}

/// Where an unfinished UTF-8 character at the end of `bytes` begins; `bytes.len()` when the
/// last character is whole (or is no character: malformed bytes are replaced, not held).
pub(crate) fn unfinished(bytes: &[u8]) -> usize {
    let length = bytes.len();
    for back in 1..=3.min(length) {
        let byte = bytes[length - back];
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: its lead is further back
        }
        let needs = match byte {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => 1,
        };
        return if needs > back { length - back } else { length };
    }
    length
}

/// `enqueue(callback)`: `queueMicrotask`.
fn enqueue(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    _rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Ok(callback) = v8::Local::<v8::Function>::try_from(args.get(0)) else {
        return throw(scope, "queueMicrotask: the callback is not a function", false);
    };
    scope.enqueue_microtask(callback);
}

/// What the serializer throws a value it cannot clone with: a `DOMException` named
/// `DataCloneError` (its class, `web.js`'s, is the second argument of `kind`). It also answers
/// that every ordinary object is a host object, which V8 then leaves to it: so that writing one
/// only tells whether V8 would clone it as an ordinary object, reading none of its properties.
struct Shallow {
    class: v8::Global<v8::Function>,
}

impl v8::ValueSerializerImpl for Shallow {
    fn throw_data_clone_error<'s>(
        &self,
        scope: &mut v8::PinScope<'s, '_>,
        message: v8::Local<'s, v8::String>,
    ) {
        let class = v8::Local::new(scope, &self.class);
        let Some(name) = v8::String::new(scope, "DataCloneError") else { return };
        // When the constructor throws instead, that exception is the pending one.
        if let Some(error) = class.new_instance(scope, &[message.into(), name.into()]) {
            scope.throw_exception(error.into());
        }
    }

    fn has_custom_host_object(&self, _isolate: &v8::Isolate) -> bool {
        true
    }

    /// A shared buffer is refused as every other value is (V8's default throws a plain `Error`).
    fn get_shared_array_buffer_id<'s>(
        &self,
        scope: &mut v8::PinScope<'s, '_>,
        _buffer: v8::Local<'s, v8::SharedArrayBuffer>,
    ) -> Option<u32> {
        if let Some(message) = v8::String::new(scope, "#<SharedArrayBuffer> could not be cloned.") {
            self.throw_data_clone_error(scope, message);
        }
        None
    }

    fn is_host_object<'s>(
        &self,
        _scope: &mut v8::PinScope<'s, '_>,
        _object: v8::Local<'s, v8::Object>,
    ) -> Option<bool> {
        Some(true)
    }

    fn write_host_object<'s>(
        &self,
        _scope: &mut v8::PinScope<'s, '_>,
        _object: v8::Local<'s, v8::Object>,
        _serializer: &dyn v8::ValueSerializerHelper,
    ) -> Option<bool> {
        Some(true)
    }
}

/// What `structuredClone` (`web.js`) makes of an object, by the rule of V8's own serializer;
/// the numbers are `web.js`'s `CLONE_*`.
#[derive(Clone, Copy)]
enum Clonable {
    Ordinary = 0,
    Array = 1,
    Date = 2,
    RegExp = 3,
    Map = 4,
    Set = 5,
    ArrayBuffer = 6,
    TypedArray = 7,
    DataView = 8,
    Error = 9,
    Wrapper = 10,
}

/// `kind(value, DOMException)`: how `structuredClone` copies `value` (a [`Clonable`]), or the
/// `DataCloneError` V8's serializer throws for it (a function, a symbol, a proxy, a promise, a
/// weak collection, an iterator, a detached buffer...).
///
/// `structuredClone` makes its copy in JavaScript, in the run's heap: V8's serializer writes a
/// string out once per reference to it, in a buffer outside every limit of the run (4 000
/// references to one 1 MiB string were 4 GiB of the host's memory), and nothing can bound that
/// buffer as it grows. What clones and how stays V8's rule: an object none of V8's type checks
/// names is written by the clone's [`CloneOracle`], which reads none of its properties.
fn kind(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let value = args.get(0);
    if let Some(known) = named_kind(value) {
        return rv.set_int32(known as i32);
    }
    let Ok(class) = v8::Local::<v8::Function>::try_from(args.get(1)) else {
        return throw(scope, "kind: no DOMException class", false);
    };
    let Some(run) = state::of(scope) else { return };
    if !run.bounds.budget.reserve_host(ORACLE_BYTES) {
        return throw(scope, "structuredClone: the copy does not fit in the run's memory", true);
    }
    // Out of the run while it writes: a refusal runs `DOMException`'s constructor.
    let taken = run.clone_oracle.borrow_mut().take();
    let mut oracle = taken.unwrap_or_else(|| state::CloneOracle {
        serializer: v8::ValueSerializer::new(
            scope,
            Box::new(Shallow { class: v8::Global::new(scope, class) }),
        ),
        charged: 0,
        budget: run.bounds.budget.clone(),
    });
    oracle.charged += ORACLE_BYTES;
    let context = scope.get_current_context();
    // Anything else is ordinary or refused; refused, the serializer threw its `DataCloneError`
    // and is dropped (it would answer for that object from its memory next time).
    if v8::ValueSerializerHelper::write_value(&oracle.serializer, context, value) == Some(true) {
        rv.set_int32(Clonable::Ordinary as i32);
        *run.clone_oracle.borrow_mut() = Some(oracle);
    }
}

/// What V8's type checks say `value` clones as; `None` for what only its serializer can tell
/// (an ordinary object, or one it refuses).
fn named_kind(value: v8::Local<'_, v8::Value>) -> Option<Clonable> {
    let detached =
        v8::Local::<v8::ArrayBuffer>::try_from(value).is_ok_and(|buffer| buffer.was_detached());
    if !value.is_object() || value.is_proxy() || value.is_function() || detached {
        return None;
    }
    let kinds = [
        (value.is_array(), Clonable::Array),
        (value.is_date(), Clonable::Date),
        (value.is_reg_exp(), Clonable::RegExp),
        (value.is_map(), Clonable::Map),
        (value.is_set(), Clonable::Set),
        (value.is_array_buffer(), Clonable::ArrayBuffer),
        (value.is_typed_array(), Clonable::TypedArray),
        (value.is_data_view(), Clonable::DataView),
        (value.is_native_error(), Clonable::Error),
        (
            value.is_boolean_object()
                || value.is_number_object()
                || value.is_string_object()
                || value.is_big_int_object(),
            Clonable::Wrapper,
        ),
    ];
    kinds.into_iter().find_map(|(is, kind)| is.then_some(kind))
}

/// `cloneDone()`: a `structuredClone` ended; its [`CloneOracle`] goes.
fn clone_done(
    scope: &mut v8::PinScope<'_, '_>,
    _args: v8::FunctionCallbackArguments<'_>,
    _rv: v8::ReturnValue<'_, v8::Value>,
) {
    if let Some(run) = state::of(scope) {
        let oracle = run.clone_oracle.borrow_mut().take();
        drop(oracle);
    }
}

/// What V8's serializer keeps per object it was asked about (an identity-map entry, a tag
/// byte), with room: charged to the run's memory while the clone lasts.
const ORACLE_BYTES: usize = 64;

/// Bytes reserved of the run's memory while a native builds what it returns.
struct Reserved {
    run: std::rc::Rc<crate::state::Run>,
    len: usize,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.run.bounds.budget.release_host(self.len);
    }
}

/// A string argument as Rust text (lone surrogates as U+FFFD, as a `USVString` has them),
/// charged to the run's memory while the native holds it (with room for what it makes of it).
struct Held {
    text: String,
    charged: usize,
    run: std::rc::Rc<crate::state::Run>,
}

impl Held {
    fn new(scope: &mut v8::PinScope<'_, '_>, value: v8::Local<'_, v8::Value>) -> Option<Self> {
        let run = state::of(scope)?;
        let string = value.to_string(scope)?;
        // The text, and about as much again for what is made from it.
        let charged = string.utf8_length(scope).saturating_mul(2);
        if !run.bounds.budget.reserve_host(charged) {
            throw(scope, "the text does not fit in the run's memory", true);
            return None;
        }
        Some(Self { text: string.to_rust_string_lossy(scope), charged, run })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.run.bounds.budget.release_host(self.charged);
    }
}

/// The parts of `url` in the order `web.js` reads them: href, origin, protocol, username,
/// password, host, hostname, port, pathname, search, hash.
fn url_parts<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    url: &url::Url,
) -> Option<v8::Local<'s, v8::Array>> {
    use url::quirks;
    let origin = quirks::origin(url);
    let parts = [
        quirks::href(url),
        origin.as_str(),
        quirks::protocol(url),
        quirks::username(url),
        quirks::password(url),
        quirks::host(url),
        quirks::hostname(url),
        quirks::port(url),
        quirks::pathname(url),
        quirks::search(url),
        quirks::hash(url),
    ];
    let values = parts
        .iter()
        .map(|part| v8::String::new(scope, part).map(Into::into))
        .collect::<Option<Vec<v8::Local<'s, v8::Value>>>>()?;
    Some(v8::Array::new_with_elements(scope, &values))
}

/// `urlParse(input, base?)`: the parts of the URL `input` names (against `base`), or `null`
/// when either does not parse.
fn url_parse(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(input) = Held::new(scope, args.get(0)) else { return };
    let base = args.get(1);
    let parsed = if base.is_undefined() {
        url::Url::parse(&input.text)
    } else {
        let Some(base) = Held::new(scope, base) else { return };
        url::Url::parse(&base.text).and_then(|base| base.join(&input.text))
    };
    match parsed {
        Ok(url) => {
            if let Some(parts) = url_parts(scope, &url) {
                rv.set(parts.into());
            }
        }
        Err(_) => rv.set(v8::null(scope).into()),
    }
}

/// `urlSet(href, part, value)`: the parts after setting part `part` (as `url_parts` numbers
/// them) of the URL `href` to `value`; a value the part cannot take leaves it as it was.
fn url_set(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    use url::quirks;
    let Some(href) = Held::new(scope, args.get(0)) else { return };
    let part = args.get(1).uint32_value(scope).unwrap_or(u32::MAX);
    let Some(value) = Held::new(scope, args.get(2)) else { return };
    let Ok(mut url) = url::Url::parse(&href.text) else {
        return throw(scope, "urlSet: the URL does not parse", false);
    };
    let value = value.text.as_str();
    // Each setter leaves the URL as it was when the value does not fit its part.
    let _ = match part {
        2 => quirks::set_protocol(&mut url, value),
        3 => quirks::set_username(&mut url, value),
        4 => quirks::set_password(&mut url, value),
        5 => quirks::set_host(&mut url, value),
        6 => quirks::set_hostname(&mut url, value),
        7 => quirks::set_port(&mut url, value),
        8 => {
            quirks::set_pathname(&mut url, value);
            Ok(())
        }
        9 => {
            quirks::set_search(&mut url, value);
            Ok(())
        }
        10 => {
            quirks::set_hash(&mut url, value);
            Ok(())
        }
        _ => Err(()),
    };
    if let Some(parts) = url_parts(scope, &url) {
        rv.set(parts.into());
    }
}

/// `formParse(text)`: `application/x-www-form-urlencoded` `text` as `[name, value]` pairs.
fn form_parse(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(text) = Held::new(scope, args.get(0)) else { return };
    // Every pair becomes V8 objects inside this one call, where V8's heap limit cannot stop the
    // program (two million pairs were a fatal out-of-memory of the whole host in `thread`
    // isolation): what they will take is reserved first, and refused as a `RangeError` when the
    // run's memory cannot hold it. The heap's own sampling counts them once they exist.
    const PAIR_BYTES: usize = 160;
    let count = text.text.bytes().filter(|&byte| byte == b'&').count() + 1;
    let needed = count.saturating_mul(PAIR_BYTES).saturating_add(text.text.len().saturating_mul(2));
    let Some(run) = state::of(scope) else { return };
    if !run.bounds.budget.reserve_host(needed) {
        return throw(scope, "URLSearchParams: the run's memory cannot hold this many pairs", true);
    }
    let _reserved = Reserved { run: run.clone(), len: needed };
    let mut pairs = Vec::with_capacity(count.min(1 << 16));
    for (name, value) in form_urlencoded::parse(text.text.as_bytes()) {
        let (Some(name), Some(value)) =
            (v8::String::new(scope, &name), v8::String::new(scope, &value))
        else {
            return throw(scope, "formParse: a name or value is longer than a string can be", true);
        };
        pairs.push(v8::Array::new_with_elements(scope, &[name.into(), value.into()]).into());
    }
    rv.set(v8::Array::new_with_elements(scope, &pairs).into());
}

/// `formSerialize([name, value, name, value, ...])`: the pairs as
/// `application/x-www-form-urlencoded` text.
fn form_serialize(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Ok(flat) = v8::Local::<v8::Array>::try_from(args.get(0)) else {
        return throw(scope, "formSerialize: not an array", false);
    };
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    let mut held = Vec::new();
    for index in (0..flat.length()).step_by(2) {
        let name = flat.get_index(scope, index).and_then(|name| Held::new(scope, name));
        let value = flat.get_index(scope, index + 1).and_then(|value| Held::new(scope, value));
        let (Some(name), Some(value)) = (name, value) else { return };
        serializer.append_pair(&name.text, &value.text);
        held.push((name, value));
    }
    match v8::String::new(scope, &serializer.finish()) {
        Some(text) => rv.set(text.into()),
        None => throw(scope, "formSerialize: the text is longer than a string can be", true),
    }
}

#[cfg(test)]
mod tests {
    use super::unfinished;

    #[test]
    fn an_unfinished_character_is_held_and_a_whole_or_malformed_one_is_not() {
        assert_eq!(unfinished(b""), 0);
        assert_eq!(unfinished(b"ab"), 2);
        assert_eq!(unfinished("é".as_bytes()), 2);
        assert_eq!(unfinished(&"é".as_bytes()[..1]), 0);
        assert_eq!(unfinished(&"a€".as_bytes()[..3]), 1);
        assert_eq!(unfinished(&"😀".as_bytes()[..3]), 0);
        assert_eq!(unfinished("😀".as_bytes()), 4);
        // A lone continuation byte, or a lead byte that leads nothing valid: replaced, not held.
        assert_eq!(unfinished(b"a\x80"), 2);
        assert_eq!(unfinished(b"a\xff"), 2);
    }
}

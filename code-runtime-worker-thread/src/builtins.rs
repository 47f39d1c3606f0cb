//! The built-ins the runtime adds to or replaces in every program's realm: `performance` and
//! `crypto` (when the realm has none; `crypto.subtle` is `web.js`'s), and in a run that may
//! pause or that resumes `Math.random` and `Date`, all reading the run's [`Entropy`]; and the
//! web platform's globals (`web.rs`), as accessors that compile them on first use.

use crate::entropy::Entropy;
use crate::state;
use crate::web;

/// The globals over the natives: `performance`, `crypto`, and in a reproducible run
/// `Math.random` and `Date`. `new Date()` and `Date()` read the run's clock; `new Date(x)` is
/// the real `Date`'s, whose prototype, statics and `instanceof` stay as they were.
const INSTALL: &str = r#"(function (global, now, sinceStart, random, bytes, reproducible, load, webNames) {
  "use strict";
  const define = (object, name, value) =>
    Object.defineProperty(object, name, { value, writable: true, configurable: true });
  if (reproducible) {
    const RealDate = global.Date;
    const Date = function Date(...args) {
      if (new.target === undefined) return new RealDate(now()).toString();
      return Reflect.construct(RealDate, args.length === 0 ? [now()] : args, new.target);
    };
    Object.setPrototypeOf(Date, RealDate);
    Object.defineProperty(Date, "prototype", { value: RealDate.prototype });
    Object.defineProperty(Date, "length", { value: 7 });
    define(Date, "now", function now_() { return Math.floor(now()); });
    define(RealDate.prototype, "constructor", Date);
    define(global, "Date", Date);
    define(Math, "random", random);
  }
  const integers = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array,
    Int32Array, Uint32Array, BigInt64Array, BigUint64Array];
  const getRandomValues = function getRandomValues(array) {
    if (!integers.some((Kind) => array instanceof Kind)) {
      throw new TypeError("crypto.getRandomValues: the argument must be an integer typed array");
    }
    if (array.byteLength > 65536) {
      throw new RangeError("crypto.getRandomValues: at most 65536 bytes at a time");
    }
    new Uint8Array(array.buffer, array.byteOffset, array.byteLength).set(bytes(array.byteLength));
    return array;
  };
  const randomUUID = function randomUUID() {
    const b = bytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };
  if (!("performance" in global)) {
    // Read on first use: the run's clock is not there yet while this installs.
    let timeOrigin;
    const origin = () => (timeOrigin ??= now() - sinceStart());
    define(global, "performance", Object.freeze({
      now: function now() { return sinceStart(); },
      get timeOrigin() { return origin(); },
      toJSON: function toJSON() { return { timeOrigin: origin() }; },
    }));
  }
  // The web platform's globals (`web.js`), compiled on the first touch of any of them: until
  // then each name is an accessor. A program that assigns one first keeps its own.
  let web;
  const loaded = () => {
    if (web === undefined) {
      const [make, natives] = load();
      web = make(global, natives, getRandomValues);
    }
    return web;
  };
  const lazy = new Map();
  const settle = () => {
    loaded();
    for (const [name, accessor] of lazy) {
      if (Object.getOwnPropertyDescriptor(global, name)?.get === accessor) define(global, name, web[name]);
    }
    lazy.clear();
  };
  for (const name of webNames) {
    if (name in global) continue;
    const get = function () { settle(); return global[name]; };
    lazy.set(name, get);
    Object.defineProperty(global, name, {
      get, set(value) { define(global, name, value); }, configurable: true, enumerable: false,
    });
  }
  if (!("crypto" in global)) {
    // `subtle` is `web.js`'s, compiled on first use like the globals above.
    define(global, "crypto", Object.freeze(Object.defineProperty({ getRandomValues, randomUUID }, "subtle", {
      get: function subtle() { return loaded().subtle; }, enumerable: true, configurable: false,
    })));
  }
})"#;

/// Installs the globals over the run's [`Entropy`] on `global`.
pub(crate) fn install<'s>(
    scope: &mut v8::PinScope<'s, '_>,
    global: v8::Local<'s, v8::Object>,
    entropy: &Entropy,
) -> Option<()> {
    let source = v8::String::new(scope, INSTALL)?;
    let installer: v8::Local<'s, v8::Function> =
        v8::Script::compile(scope, source, None)?.run(scope)?.try_into().ok()?;
    let arguments = [
        global.into(),
        v8::Function::new(scope, now)?.into(),
        v8::Function::new(scope, web::since_start)?.into(),
        v8::Function::new(scope, random)?.into(),
        v8::Function::new(scope, bytes)?.into(),
        v8::Boolean::new(scope, entropy.reproducible()).into(),
        v8::Function::new(scope, web::load)?.into(),
        web_names(scope)?.into(),
    ];
    let undefined = v8::undefined(scope).into();
    installer.call(scope, undefined, &arguments)?;
    Some(())
}

/// [`web::NAMES`] as an array of strings.
fn web_names<'s>(scope: &mut v8::PinScope<'s, '_>) -> Option<v8::Local<'s, v8::Array>> {
    let names = web::NAMES
        .iter()
        .map(|name| v8::String::new(scope, name).map(Into::into))
        .collect::<Option<Vec<v8::Local<'s, v8::Value>>>>()?;
    Some(v8::Array::new_with_elements(scope, &names))
}

fn now(
    scope: &mut v8::PinScope<'_, '_>,
    _args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(run) = state::of(scope) else { return };
    rv.set(v8::Number::new(scope, run.entropy.now_ms()).into());
}

fn random(
    scope: &mut v8::PinScope<'_, '_>,
    _args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(run) = state::of(scope) else { return };
    rv.set(v8::Number::new(scope, run.entropy.random()).into());
}

/// `bytes(n)`: a fresh `Uint8Array` of `n` random bytes (`n` at most 65536, checked by the
/// caller above).
fn bytes(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(run) = state::of(scope) else { return };
    let count = args.get(0).uint32_value(scope).unwrap_or(0).min(65_536) as usize;
    let mut filled = vec![0u8; count];
    if !run.entropy.fill(&mut filled) {
        let message = v8::String::new(scope, "crypto: the random source failed")
            .unwrap_or_else(|| v8::String::empty(scope));
        let error = v8::Exception::error(scope, message);
        scope.throw_exception(error);
        return;
    }
    let store = v8::ArrayBuffer::new_backing_store_from_vec(filled).make_shared();
    let buffer = v8::ArrayBuffer::with_backing_store(scope, &store);
    if let Some(array) = v8::Uint8Array::new(scope, buffer, 0, count) {
        rv.set(array.into());
    }
}

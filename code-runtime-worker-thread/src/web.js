// The web platform's common globals that need no I/O (WinterTC's Minimum Common API, in part),
// in JavaScript over the realm's own built-ins. Compiled on first use of any of them in a run
// (`web.rs`); this function returns them by name.
(function (global, natives, getRandomValues) {
  "use strict";
  const define = (object, name, value) =>
    Object.defineProperty(object, name, { value, writable: true, configurable: true });
  const tag = (Class, name) =>
    Object.defineProperty(Class.prototype, Symbol.toStringTag, { value: name, configurable: true });
  const required = (count, given, what) => {
    if (given < count) {
      throw new TypeError(
        `${what}: ${count} argument${count === 1 ? "" : "s"} required, but only ${given} present.`);
    }
  };

  // DOMException: an Error with a name and its legacy code.
  const codes = {
    IndexSizeError: 1, HierarchyRequestError: 3, WrongDocumentError: 4, InvalidCharacterError: 5,
    NoModificationAllowedError: 7, NotFoundError: 8, NotSupportedError: 9,
    InvalidStateError: 11, SyntaxError: 12, InvalidModificationError: 13, NamespaceError: 14,
    InvalidAccessError: 15, TypeMismatchError: 17, SecurityError: 18, NetworkError: 19,
    AbortError: 20, URLMismatchError: 21, QuotaExceededError: 22, TimeoutError: 23,
    InvalidNodeTypeError: 24, DataCloneError: 25,
  };
  class DOMException extends Error {
    #name;
    constructor(message = "", options = "Error") {
      super(String(message));
      let name = "Error";
      if (options !== null && typeof options === "object") {
        if (options.name !== undefined) name = String(options.name);
        if ("cause" in options) define(this, "cause", options.cause);
      } else {
        name = String(options);
      }
      this.#name = name;
    }
    get name() { return this.#name; }
    get code() { return Object.hasOwn(codes, this.#name) ? codes[this.#name] : 0; }
  }
  for (const [name, code] of Object.entries(codes)) {
    const constant = name === "URLMismatchError"
      ? "URL_MISMATCH_ERR"
      : name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase().replace(/_ERROR$/, "_ERR");
    Object.defineProperty(DOMException, constant, { value: code, enumerable: true });
    Object.defineProperty(DOMException.prototype, constant, { value: code, enumerable: true });
  }
  tag(DOMException, "DOMException");

  // Event and EventTarget: one target, no tree (capture and bubbling have nowhere to go).
  let access;
  class Event {
    #type; #bubbles; #cancelable; #composed; #timeStamp;
    #defaultPrevented = false; #target = null; #currentTarget = null; #phase = 0;
    #stop = false; #stopImmediate = false; #passive = false; #dispatching = false;
    constructor(type, init = undefined) {
      required(1, arguments.length, "Failed to construct 'Event'");
      this.#type = String(type);
      const options = init ?? {};
      this.#bubbles = Boolean(options.bubbles);
      this.#cancelable = Boolean(options.cancelable);
      this.#composed = Boolean(options.composed);
      this.#timeStamp = natives.now();
    }
    get type() { return this.#type; }
    get target() { return this.#target; }
    get srcElement() { return this.#target; }
    get currentTarget() { return this.#currentTarget; }
    get eventPhase() { return this.#phase; }
    get bubbles() { return this.#bubbles; }
    get cancelable() { return this.#cancelable; }
    get composed() { return this.#composed; }
    get defaultPrevented() { return this.#defaultPrevented; }
    get returnValue() { return !this.#defaultPrevented; }
    set returnValue(value) { if (!value) this.preventDefault(); }
    get cancelBubble() { return this.#stop; }
    set cancelBubble(value) { if (value) this.#stop = true; }
    get timeStamp() { return this.#timeStamp; }
    get isTrusted() { return false; }
    composedPath() { return this.#dispatching ? [this.#currentTarget] : []; }
    stopPropagation() { this.#stop = true; }
    stopImmediatePropagation() { this.#stop = true; this.#stopImmediate = true; }
    preventDefault() { if (this.#cancelable && !this.#passive) this.#defaultPrevented = true; }
    static {
      access = {
        begin(event, target) {
          if (event.#dispatching) {
            throw new DOMException("The event is already being dispatched.", "InvalidStateError");
          }
          event.#dispatching = true;
          event.#target = target;
          event.#currentTarget = target;
          event.#phase = 2;
        },
        passive(event, passive) { event.#passive = passive; },
        stoppedImmediately(event) { return event.#stopImmediate; },
        end(event) {
          event.#dispatching = false;
          event.#currentTarget = null;
          event.#phase = 0;
          event.#stop = false;
          event.#stopImmediate = false;
          return !event.#defaultPrevented;
        },
      };
    }
  }
  for (const [name, value] of [["NONE", 0], ["CAPTURING_PHASE", 1], ["AT_TARGET", 2], ["BUBBLING_PHASE", 3]]) {
    Object.defineProperty(Event, name, { value, enumerable: true });
    Object.defineProperty(Event.prototype, name, { value, enumerable: true });
  }
  tag(Event, "Event");

  class CustomEvent extends Event {
    #detail;
    constructor(type, init = undefined) {
      required(1, arguments.length, "Failed to construct 'CustomEvent'");
      super(type, init);
      this.#detail = init?.detail ?? null;
    }
    get detail() { return this.#detail; }
  }
  tag(CustomEvent, "CustomEvent");

  const flags = (options) => typeof options === "boolean" || options == null
    ? { capture: Boolean(options), once: false, passive: false, signal: undefined }
    : {
      capture: Boolean(options.capture),
      once: Boolean(options.once),
      passive: Boolean(options.passive),
      signal: options.signal,
    };

  class EventTarget {
    #listeners = new Map();
    addEventListener(type, callback, options = undefined) {
      required(2, arguments.length, "Failed to execute 'addEventListener' on 'EventTarget'");
      if (callback == null) return;
      const { capture, once, passive, signal } = flags(options);
      if (signal !== undefined && !(signal instanceof AbortSignal)) {
        throw new TypeError("The \"signal\" option must be an AbortSignal");
      }
      if (signal?.aborted) return;
      type = String(type);
      let list = this.#listeners.get(type);
      if (list === undefined) this.#listeners.set(type, (list = []));
      if (list.some((entry) => entry.callback === callback && entry.capture === capture)) return;
      list.push({ callback, capture, once, passive, removed: false });
      signal?.addEventListener("abort", () => this.removeEventListener(type, callback, { capture }));
    }
    removeEventListener(type, callback, options = undefined) {
      required(2, arguments.length, "Failed to execute 'removeEventListener' on 'EventTarget'");
      const list = this.#listeners.get(String(type));
      if (list === undefined) return;
      const { capture } = flags(options);
      const at = list.findIndex((entry) => entry.callback === callback && entry.capture === capture);
      if (at !== -1) {
        list[at].removed = true;
        list.splice(at, 1);
      }
    }
    dispatchEvent(event) {
      required(1, arguments.length, "Failed to execute 'dispatchEvent' on 'EventTarget'");
      if (!(event instanceof Event)) {
        throw new TypeError("Failed to execute 'dispatchEvent' on 'EventTarget': parameter 1 is not of type 'Event'.");
      }
      access.begin(event, this);
      try {
        for (const entry of [...(this.#listeners.get(event.type) ?? [])]) {
          if (entry.removed) continue;
          if (entry.once) this.removeEventListener(event.type, entry.callback, { capture: entry.capture });
          access.passive(event, entry.passive);
          try {
            if (typeof entry.callback === "function") entry.callback.call(this, event);
            else if (typeof entry.callback?.handleEvent === "function") entry.callback.handleEvent(event);
          } catch (error) {
            // A listener's exception does not stop the others; the run sees it, as an
            // unhandled rejection, once this dispatch is over.
            Promise.reject(error);
          }
          access.passive(event, false);
          if (access.stoppedImmediately(event)) break;
        }
      } finally {
        return access.end(event);
      }
    }
  }
  tag(EventTarget, "EventTarget");

  // AbortController and AbortSignal.
  const create = Symbol("create");
  let signalAbort;
  class AbortSignal extends EventTarget {
    #aborted = false;
    #reason = undefined;
    #onabort = null;
    #handler = null;
    constructor(key) {
      if (key !== create) throw new TypeError("Illegal constructor");
      super();
    }
    get aborted() { return this.#aborted; }
    get reason() { return this.#reason; }
    throwIfAborted() { if (this.#aborted) throw this.#reason; }
    get onabort() { return this.#onabort; }
    set onabort(handler) {
      this.#onabort = typeof handler === "function" || (handler !== null && typeof handler === "object") ? handler : null;
      if (this.#handler === null) {
        this.#handler = (event) => {
          const handler = this.#onabort;
          if (typeof handler === "function") handler.call(this, event);
        };
        this.addEventListener("abort", this.#handler);
      }
    }
    static abort(reason = undefined) {
      const signal = new AbortSignal(create);
      signalAbort(signal, reason);
      return signal;
    }
    static timeout(ms) {
      required(1, arguments.length, "Failed to execute 'timeout' on 'AbortSignal'");
      const delay = Number(ms);
      if (!Number.isFinite(delay) || delay < 0 || delay > Number.MAX_SAFE_INTEGER) {
        throw new TypeError(`AbortSignal.timeout: ${ms} is not a valid number of milliseconds`);
      }
      const signal = new AbortSignal(create);
      global.setTimeout(() => signalAbort(signal,
        new DOMException("The operation was aborted due to timeout", "TimeoutError")), delay);
      return signal;
    }
    static any(signals) {
      required(1, arguments.length, "Failed to execute 'any' on 'AbortSignal'");
      const sources = [...signals];
      for (const source of sources) {
        if (!(source instanceof AbortSignal)) {
          throw new TypeError("AbortSignal.any: every element must be an AbortSignal");
        }
      }
      const signal = new AbortSignal(create);
      const aborted = sources.find((source) => source.aborted);
      if (aborted !== undefined) {
        signalAbort(signal, aborted.reason);
        return signal;
      }
      for (const source of sources) {
        source.addEventListener("abort", () => signalAbort(signal, source.reason), { once: true });
      }
      return signal;
    }
    static {
      signalAbort = (signal, reason) => {
        if (signal.#aborted) return;
        signal.#aborted = true;
        signal.#reason = reason === undefined
          ? new DOMException("This operation was aborted", "AbortError")
          : reason;
        signal.dispatchEvent(new Event("abort"));
      };
    }
  }
  tag(AbortSignal, "AbortSignal");

  class AbortController {
    #signal = new AbortSignal(create);
    get signal() { return this.#signal; }
    abort(reason = undefined) { signalAbort(this.#signal, reason); }
  }
  tag(AbortController, "AbortController");

  // atob and btoa: forgiving base64 over Latin-1 strings.
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const sextets = new Int8Array(128).fill(-1);
  for (let i = 0; i < alphabet.length; i++) sextets[alphabet.charCodeAt(i)] = i;
  // Text is built in pieces of this many characters (`String.fromCharCode` takes its arguments
  // on the stack).
  const PIECE = 8192;
  function btoa(data) {
    required(1, arguments.length, "Failed to execute 'btoa'");
    const text = String(data);
    const out = [];
    let piece = [];
    for (let i = 0; i < text.length; i += 3) {
      const a = text.charCodeAt(i), b = text.charCodeAt(i + 1), c = text.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) {
        throw new DOMException("Invalid character", "InvalidCharacterError");
      }
      const left = text.length - i;
      piece.push(
        alphabet.charCodeAt(a >> 2),
        alphabet.charCodeAt(((a & 3) << 4) | (left > 1 ? b >> 4 : 0)),
        left > 1 ? alphabet.charCodeAt(((b & 15) << 2) | (left > 2 ? c >> 6 : 0)) : 61,
        left > 2 ? alphabet.charCodeAt(c & 63) : 61);
      if (piece.length >= PIECE) {
        out.push(String.fromCharCode.apply(null, piece));
        piece = [];
      }
    }
    out.push(String.fromCharCode.apply(null, piece));
    return out.join("");
  }
  function atob(data) {
    required(1, arguments.length, "Failed to execute 'atob'");
    const invalid = () => new DOMException(
      "The string to be decoded is not correctly encoded.", "InvalidCharacterError");
    let text = String(data).replace(/[\t\n\f\r ]+/g, "");
    if (text.length % 4 === 0) text = text.replace(/={1,2}$/, "");
    if (text.length % 4 === 1) throw invalid();
    const out = [];
    let piece = [];
    let buffer = 0, bits = 0;
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      const value = code < 128 ? sextets[code] : -1;
      if (value < 0) throw invalid();
      buffer = (buffer << 6) | value;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        piece.push((buffer >> bits) & 255);
        if (piece.length >= PIECE) {
          out.push(String.fromCharCode.apply(null, piece));
          piece = [];
        }
      }
    }
    out.push(String.fromCharCode.apply(null, piece));
    return out.join("");
  }

  // TextEncoder and TextDecoder: UTF-8 by V8's own coders (natives), and the Encoding
  // Standard's other encodings by `encoding_rs` (`encoding.rs`).
  class TextEncoder {
    get encoding() { return "utf-8"; }
    encode(input = "") {
      const text = String(input);
      // Made here, so the run's memory budget refuses it as a RangeError; filled natively.
      const bytes = new Uint8Array(natives.utf8Length(text));
      natives.encodeInto(text, bytes);
      return bytes;
    }
    encodeInto(source, destination) {
      required(2, arguments.length, "Failed to execute 'encodeInto' on 'TextEncoder'");
      if (!(destination instanceof Uint8Array)) {
        throw new TypeError("Failed to execute 'encodeInto' on 'TextEncoder': parameter 2 is not of type 'Uint8Array'.");
      }
      const [read, written] = natives.encodeInto(String(source), destination);
      return { read, written };
    }
  }
  tag(TextEncoder, "TextEncoder");

  class TextDecoder {
    #encoding; #fatal; #ignoreBOM;
    // UTF-8: the bytes of an unfinished character; other encodings: the id of their stream.
    #pending = null; #stream = 0;
    constructor(label = "utf-8", options = undefined) {
      const name = natives.encoding(String(label));
      if (name === null || name === "replacement") {
        throw new RangeError(`The "${name ?? label}" encoding is not supported`);
      }
      this.#encoding = name;
      this.#fatal = Boolean(options?.fatal);
      this.#ignoreBOM = Boolean(options?.ignoreBOM);
    }
    get encoding() { return this.#encoding; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input = undefined, options = undefined) {
      let bytes;
      if (input === undefined) bytes = new Uint8Array(0);
      else if (input instanceof ArrayBuffer || input instanceof SharedArrayBuffer) bytes = new Uint8Array(input);
      else if (ArrayBuffer.isView(input)) bytes = new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
      else {
        throw new TypeError("Failed to execute 'decode' on 'TextDecoder': The provided value is not of type '(ArrayBuffer or ArrayBufferView)'.");
      }
      const stream = Boolean(options?.stream);
      if (this.#encoding !== "utf-8") {
        const [text, id] = natives.decodeAs(this.#encoding, bytes, this.#fatal, this.#ignoreBOM, stream, this.#stream);
        this.#stream = id;
        if (text === null) {
          throw new TypeError(`The encoded data was not valid for encoding ${this.#encoding}`);
        }
        return text;
      }
      const start = this.#pending === null;
      if (this.#pending !== null) {
        const joined = new Uint8Array(this.#pending.length + bytes.length);
        joined.set(this.#pending);
        joined.set(bytes, this.#pending.length);
        bytes = joined;
        this.#pending = null;
      }
      // The bytes of a character the stream has not finished stay for the next call.
      let end = bytes.length;
      if (stream) {
        end = natives.complete(bytes);
        if (end < bytes.length) this.#pending = bytes.slice(end);
      }
      const text = natives.decode(end === bytes.length ? bytes : bytes.subarray(0, end), this.#fatal);
      if (text === null) {
        this.#pending = null;
        throw new TypeError("The encoded data was not valid for encoding utf-8");
      }
      return start && !this.#ignoreBOM && text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
    }
  }
  tag(TextDecoder, "TextDecoder");

  // Timers: intervals over the run's `setTimeout`, under one id for their life, which
  // `clearInterval` and `clearTimeout` both end.
  const setTimeout = global.setTimeout;
  const clearTimeout = global.clearTimeout;
  const intervals = new Map();
  function setInterval(callback, ms = 0, ...args) {
    if (typeof callback !== "function") {
      throw new TypeError("setInterval: the callback must be a function");
    }
    let id;
    const tick = () => {
      intervals.set(id, setTimeout(tick, ms));
      callback(...args);
    };
    id = setTimeout(tick, ms);
    intervals.set(id, id);
    return id;
  }
  function clearInterval(id) {
    const current = intervals.get(id);
    intervals.delete(id);
    clearTimeout(current ?? id);
  }
  define(global, "clearTimeout", function clearTimeout_(id) { clearInterval(id); });
  Object.defineProperty(global.clearTimeout, "name", { value: "clearTimeout" });

  function queueMicrotask(callback) {
    required(1, arguments.length, "Failed to execute 'queueMicrotask'");
    if (typeof callback !== "function") {
      throw new TypeError("Failed to execute 'queueMicrotask': The callback provided as parameter 1 is not a function.");
    }
    natives.enqueue(callback);
  }

  // structuredClone: the copy is made here, in the run's heap and under its limit, by the rules
  // of V8's own serializer (`natives.kind` says which applies to an object, or throws V8's
  // DataCloneError; see web.rs for why V8's serializer does not make the copy itself). Each
  // object is copied once (cycles and shared references kept), depth first, each property read
  // once in V8's order; a value nested deeper than the stack allows is a RangeError.
  const CLONE_ORDINARY = 0, CLONE_ARRAY = 1, CLONE_DATE = 2, CLONE_REGEXP = 3, CLONE_MAP = 4,
    CLONE_SET = 5, CLONE_ARRAY_BUFFER = 6, CLONE_TYPED_ARRAY = 7, CLONE_DATA_VIEW = 8,
    CLONE_ERROR = 9, CLONE_WRAPPER = 10;
  const uncurry = (f) => Function.prototype.call.bind(f);
  const getter = (prototype, name) => uncurry(Object.getOwnPropertyDescriptor(prototype, name).get);
  const TypedArray = Object.getPrototypeOf(Uint8Array);
  const clones = {
    ownKeys: Object.keys,
    hasOwn: Object.hasOwn,
    ownDescriptor: Object.getOwnPropertyDescriptor,
    defineProperty: Object.defineProperty,
    time: uncurry(Date.prototype.getTime),
    source: getter(RegExp.prototype, "source"),
    flags: getter(RegExp.prototype, "flags"),
    mapEntries: uncurry(Map.prototype.entries),
    mapSet: uncurry(Map.prototype.set),
    setValues: uncurry(Set.prototype.values),
    setAdd: uncurry(Set.prototype.add),
    toArray: Array.from,
    byteLength: getter(ArrayBuffer.prototype, "byteLength"),
    resizable: getter(ArrayBuffer.prototype, "resizable"),
    maxByteLength: getter(ArrayBuffer.prototype, "maxByteLength"),
    typedName: getter(TypedArray.prototype, Symbol.toStringTag),
    typedBuffer: getter(TypedArray.prototype, "buffer"),
    typedOffset: getter(TypedArray.prototype, "byteOffset"),
    typedLength: getter(TypedArray.prototype, "length"),
    viewBuffer: getter(DataView.prototype, "buffer"),
    viewOffset: getter(DataView.prototype, "byteOffset"),
    viewLength: getter(DataView.prototype, "byteLength"),
    setBytes: uncurry(TypedArray.prototype.set),
    typed: Object.fromEntries(["Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array",
      "Uint16Array", "Int32Array", "Uint32Array", "Float16Array", "Float32Array", "Float64Array",
      "BigInt64Array", "BigUint64Array"].filter((name) => typeof global[name] === "function")
      .map((name) => [name, global[name]])),
    errors: { EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError },
    unwrap: [Boolean, Number, String, BigInt].map((Class) => uncurry(Class.prototype.valueOf)),
  };
  const cloneData = (copy, key, value) => clones.defineProperty(copy, key,
    { value, writable: true, enumerable: true, configurable: true });

  // Own enumerable string-keyed properties still there when their turn comes, as V8 writes them,
  // made own data properties of the copy (assigned, twice as fast, unless the copy inherits the
  // name: `__proto__`, or whatever the program put on `Object.prototype`).
  function cloneProperties(value, copy, copies) {
    for (const key of clones.ownKeys(value)) {
      if (!clones.hasOwn(value, key)) continue;
      const property = cloneValue(value[key], copies);
      if (key in copy) {
        cloneData(copy, key, property);
      } else {
        copy[key] = property;
      }
    }
    return copy;
  }

  function cloneError(value, copies) {
    const message = clones.ownDescriptor(value, "message");
    const cause = clones.ownDescriptor(value, "cause");
    const name = String(value.name);
    const Class = clones.hasOwn(clones.errors, name) ? clones.errors[name] : Error;
    const copy = message !== undefined && "value" in message
      ? new Class(String(message.value)) : new Class();
    copies.set(value, copy);
    const stack = value.stack;
    if (typeof stack === "string") {
      clones.defineProperty(copy, "stack", { value: stack, writable: true, configurable: true });
    } else {
      delete copy.stack;
    }
    if (cause !== undefined && "value" in cause) {
      clones.defineProperty(copy, "cause",
        { value: cloneValue(cause.value, copies), writable: true, configurable: true });
    }
    return copy;
  }

  function cloneBuffer(value) {
    const length = clones.byteLength(value);
    const copy = clones.resizable(value)
      ? new ArrayBuffer(length, { maxByteLength: clones.maxByteLength(value) })
      : new ArrayBuffer(length);
    clones.setBytes(new Uint8Array(copy), new Uint8Array(value, 0, length));
    return copy;
  }

  function cloneWrapper(value) {
    for (const unwrap of clones.unwrap) {
      try {
        return Object(unwrap(value));
      } catch {
        // Not this wrapper's type.
      }
    }
    throw new DOMException(`${value} could not be cloned.`, "DataCloneError");
  }

  function cloneValue(value, copies) {
    if (typeof value === "symbol") natives.kind(value, DOMException);
    if (value === null || (typeof value !== "object" && typeof value !== "function")) return value;
    const known = copies.get(value);
    if (known !== undefined) return known;
    const kind = natives.kind(value, DOMException);
    let copy;
    switch (kind) {
      case CLONE_ORDINARY:
        copies.set(value, copy = {});
        return cloneProperties(value, copy, copies);
      case CLONE_ARRAY:
        copies.set(value, copy = new Array(value.length));
        return cloneProperties(value, copy, copies);
      case CLONE_MAP: {
        copies.set(value, copy = new Map());
        for (const [key, entry] of clones.toArray(clones.mapEntries(value))) {
          const keyCopy = cloneValue(key, copies);
          clones.mapSet(copy, keyCopy, cloneValue(entry, copies));
        }
        return copy;
      }
      case CLONE_SET:
        copies.set(value, copy = new Set());
        for (const entry of clones.toArray(clones.setValues(value))) {
          clones.setAdd(copy, cloneValue(entry, copies));
        }
        return copy;
      case CLONE_ERROR:
        return cloneError(value, copies);
      case CLONE_DATE:
        copy = new Date(clones.time(value));
        break;
      case CLONE_REGEXP:
        copy = new RegExp(clones.source(value), clones.flags(value));
        break;
      case CLONE_ARRAY_BUFFER:
        copy = cloneBuffer(value);
        break;
      case CLONE_TYPED_ARRAY: {
        const buffer = cloneValue(clones.typedBuffer(value), copies);
        const Class = clones.typed[clones.typedName(value)];
        copy = new Class(buffer, clones.typedOffset(value), clones.typedLength(value));
        break;
      }
      case CLONE_DATA_VIEW: {
        const buffer = cloneValue(clones.viewBuffer(value), copies);
        copy = new DataView(buffer, clones.viewOffset(value), clones.viewLength(value));
        break;
      }
      case CLONE_WRAPPER:
        copy = cloneWrapper(value);
        break;
    }
    copies.set(value, copy);
    return copy;
  }

  function structuredClone(value, options = undefined) {
    required(1, arguments.length, "Failed to execute 'structuredClone'");
    if (options?.transfer !== undefined && [...options.transfer].length > 0) {
      throw new DOMException("structuredClone: transfer is not supported here", "DataCloneError");
    }
    try {
      return cloneValue(value, new Map());
    } finally {
      natives.cloneDone();
    }
  }

  const navigator = Object.freeze(Object.create(Object.freeze(Object.defineProperties({}, {
    userAgent: { get() { return natives.userAgent; }, enumerable: true },
    hardwareConcurrency: { get() { return 1; }, enumerable: true },
    language: { get() { return "en-US"; }, enumerable: true },
    languages: { get() { return ["en-US"]; }, enumerable: true },
    [Symbol.toStringTag]: { value: "Navigator" },
  }))));


  // URL and URLSearchParams: WHATWG parsing and setters by the `url` crate (natives), the state
  // and the list here.
  const usv = (value) => String(value).toWellFormed();
  const HREF = 0, ORIGIN = 1, PROTOCOL = 2, USERNAME = 3, PASSWORD = 4, HOST = 5, HOSTNAME = 6,
    PORT = 7, PATHNAME = 8, SEARCH = 9, HASH = 10;
  let paramsAccess, urlAccess;
  class URLSearchParams {
    #list = [];
    #url = null;
    constructor(init = undefined) {
      if (init instanceof URLSearchParams) {
        this.#list = init.#list.map(([name, value]) => [name, value]);
      } else if (init !== null && (typeof init === "object" || typeof init === "function")) {
        if (typeof init[Symbol.iterator] === "function") {
          for (const pair of init) {
            const entry = [...pair];
            if (entry.length !== 2) {
              throw new TypeError("Each query pair must be an iterable [name, value] tuple");
            }
            this.#list.push([usv(entry[0]), usv(entry[1])]);
          }
        } else {
          for (const key of Reflect.ownKeys(init)) {
            if (typeof key === "string" && Object.prototype.propertyIsEnumerable.call(init, key)) {
              this.#list.push([usv(key), usv(init[key])]);
            }
          }
        }
      } else if (init !== undefined) {
        const text = usv(init);
        this.#list = natives.formParse(text.startsWith("?") ? text.slice(1) : text);
      }
    }
    #update() {
      if (this.#url !== null) urlAccess.query(this.#url, this.toString());
    }
    get size() { return this.#list.length; }
    append(name, value) {
      required(2, arguments.length, "Failed to execute 'append' on 'URLSearchParams'");
      this.#list.push([usv(name), usv(value)]);
      this.#update();
    }
    delete(name, value = undefined) {
      required(1, arguments.length, "Failed to execute 'delete' on 'URLSearchParams'");
      const key = usv(name);
      const only = value === undefined ? undefined : usv(value);
      this.#list = this.#list.filter(([k, v]) => k !== key || (only !== undefined && v !== only));
      this.#update();
    }
    get(name) {
      required(1, arguments.length, "Failed to execute 'get' on 'URLSearchParams'");
      const key = usv(name);
      const entry = this.#list.find(([k]) => k === key);
      return entry === undefined ? null : entry[1];
    }
    getAll(name) {
      required(1, arguments.length, "Failed to execute 'getAll' on 'URLSearchParams'");
      const key = usv(name);
      return this.#list.filter(([k]) => k === key).map(([, v]) => v);
    }
    has(name, value = undefined) {
      required(1, arguments.length, "Failed to execute 'has' on 'URLSearchParams'");
      const key = usv(name);
      const only = value === undefined ? undefined : usv(value);
      return this.#list.some(([k, v]) => k === key && (only === undefined || v === only));
    }
    set(name, value) {
      required(2, arguments.length, "Failed to execute 'set' on 'URLSearchParams'");
      const key = usv(name), text = usv(value);
      const at = this.#list.findIndex(([k]) => k === key);
      if (at === -1) {
        this.#list.push([key, text]);
      } else {
        this.#list[at] = [key, text];
        this.#list = this.#list.filter(([k], index) => k !== key || index === at);
      }
      this.#update();
    }
    sort() {
      // By UTF-16 code units, as `<` compares; `sort` is stable.
      this.#list.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      this.#update();
    }
    toString() { return natives.formSerialize(this.#list.flat()); }
    forEach(callback, thisArg = undefined) {
      if (typeof callback !== "function") {
        throw new TypeError("Failed to execute 'forEach' on 'URLSearchParams': parameter 1 is not a function.");
      }
      for (let index = 0; index < this.#list.length; index++) {
        const [name, value] = this.#list[index];
        callback.call(thisArg, value, name, this);
      }
    }
    *entries() { for (let index = 0; index < this.#list.length; index++) yield [...this.#list[index]]; }
    *keys() { for (let index = 0; index < this.#list.length; index++) yield this.#list[index][0]; }
    *values() { for (let index = 0; index < this.#list.length; index++) yield this.#list[index][1]; }
    [Symbol.iterator]() { return this.entries(); }
    static {
      paramsAccess = {
        attach(params, url) { params.#url = url; },
        replace(params, query) { params.#list = query === "" ? [] : natives.formParse(query); },
      };
    }
  }
  tag(URLSearchParams, "URLSearchParams");

  const parsed = (url, base) => natives.urlParse(usv(url), base === undefined ? undefined : usv(base));
  class URL {
    #parts;
    #params = null;
    constructor(url, base = undefined) {
      required(1, arguments.length, "Failed to construct 'URL'");
      const parts = parsed(url, base);
      if (parts === null) throw new TypeError("Invalid URL");
      this.#parts = parts;
    }
    static canParse(url, base = undefined) {
      required(1, arguments.length, "Failed to execute 'canParse' on 'URL'");
      return parsed(url, base) !== null;
    }
    static parse(url, base = undefined) {
      required(1, arguments.length, "Failed to execute 'parse' on 'URL'");
      const parts = parsed(url, base);
      if (parts === null) return null;
      const made = new URL("about:blank");
      made.#parts = parts;
      return made;
    }
    #set(index, value) {
      this.#parts = natives.urlSet(this.#parts[HREF], index, usv(value));
      if (index === SEARCH || index === HREF) this.#reparams();
    }
    #reparams() {
      if (this.#params !== null) paramsAccess.replace(this.#params, this.#parts[SEARCH].slice(1));
    }
    get href() { return this.#parts[HREF]; }
    set href(value) {
      const parts = parsed(value, undefined);
      if (parts === null) throw new TypeError("Invalid URL");
      this.#parts = parts;
      this.#reparams();
    }
    get origin() { return this.#parts[ORIGIN]; }
    get protocol() { return this.#parts[PROTOCOL]; }
    set protocol(value) { this.#set(PROTOCOL, value); }
    get username() { return this.#parts[USERNAME]; }
    set username(value) { this.#set(USERNAME, value); }
    get password() { return this.#parts[PASSWORD]; }
    set password(value) { this.#set(PASSWORD, value); }
    get host() { return this.#parts[HOST]; }
    set host(value) { this.#set(HOST, value); }
    get hostname() { return this.#parts[HOSTNAME]; }
    set hostname(value) { this.#set(HOSTNAME, value); }
    get port() { return this.#parts[PORT]; }
    set port(value) { this.#set(PORT, value); }
    get pathname() { return this.#parts[PATHNAME]; }
    set pathname(value) { this.#set(PATHNAME, value); }
    get search() { return this.#parts[SEARCH]; }
    set search(value) { this.#set(SEARCH, value); }
    get hash() { return this.#parts[HASH]; }
    set hash(value) { this.#set(HASH, value); }
    get searchParams() {
      if (this.#params === null) {
        this.#params = new URLSearchParams(this.#parts[SEARCH]);
        paramsAccess.attach(this.#params, this);
      }
      return this.#params;
    }
    toString() { return this.#parts[HREF]; }
    toJSON() { return this.#parts[HREF]; }
    static {
      urlAccess = {
        query(url, query) { url.#parts = natives.urlSet(url.#parts[HREF], SEARCH, query); },
      };
    }
  }
  tag(URL, "URL");


  // crypto.subtle: the SHA digests and HMAC (natives over RustCrypto's, `crypto.rs`); Web
  // Crypto's other algorithms are refused by name, with what is here.
  const HASHES = { "SHA-1": [20, 512], "SHA-256": [32, 512], "SHA-384": [48, 1024], "SHA-512": [64, 1024] };
  const JWK_ALGS = { "SHA-1": "HS1", "SHA-256": "HS256", "SHA-384": "HS384", "SHA-512": "HS512" };
  const HERE = "crypto.subtle has digest (SHA-1, SHA-256, SHA-384, SHA-512) and HMAC (generateKey, importKey, exportKey, sign, verify)";
  const unsupported = (what) => new DOMException(`${what} is not supported here: ${HERE}`, "NotSupportedError");
  const algorithmName = (algorithm) => {
    if (typeof algorithm === "string") return algorithm;
    if (algorithm !== null && typeof algorithm === "object" && algorithm.name !== undefined) {
      return String(algorithm.name);
    }
    throw new TypeError("Algorithm: name: Missing or not a string");
  };
  // Algorithm names match ASCII case-insensitively (`"ſha-1"` names nothing).
  const upper = (name) => name.replace(/[a-z]+/g, (letters) => letters.toUpperCase());
  const hashOf = (algorithm) => {
    const name = algorithmName(algorithm);
    const canonical = upper(name);
    if (!(canonical in HASHES)) throw unsupported(`The algorithm "${name}"`);
    return canonical;
  };
  const isHmac = (algorithm) => {
    const name = algorithmName(algorithm);
    if (upper(name) !== "HMAC") throw unsupported(`The algorithm "${name}"`);
  };
  // The bytes of a BufferSource, as a Uint8Array over them (read before the method returns).
  const bytesOf = (value, what) => {
    if (value instanceof ArrayBuffer || value instanceof SharedArrayBuffer) return new Uint8Array(value);
    if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    throw new TypeError(`${what}: not an ArrayBuffer, TypedArray or DataView`);
  };
  const keyUsages = (usages, allowed) => {
    const list = [...usages].map(String);
    for (const usage of list) {
      if (!allowed.includes(usage)) throw new DOMException(`Unsupported key usage for an HMAC key: ${usage}`, "SyntaxError");
    }
    if (list.length === 0) throw new DOMException("Usages cannot be empty when creating a key.", "SyntaxError");
    return [...new Set(list)];
  };
  const base64url = (bytes) => {
    const pieces = [];
    for (let i = 0; i < bytes.length; i += PIECE) pieces.push(String.fromCharCode.apply(null, bytes.subarray(i, i + PIECE)));
    return btoa(pieces.join("")).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };
  const fromBase64url = (text) => {
    if (typeof text !== "string" || /[^A-Za-z0-9_-]/.test(text)) {
      throw new DOMException("Invalid keyData: k is not base64url", "DataError");
    }
    let binary;
    try { binary = atob(text.replace(/-/g, "+").replace(/_/g, "/")); } catch {
      throw new DOMException("Invalid keyData: k is not base64url", "DataError");
    }
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  };

  const making = Symbol("making");
  let keyAccess;
  class CryptoKey {
    #algorithm; #extractable; #usages; #bytes;
    constructor(token, hash, bytes, extractable, usages) {
      if (token !== making) throw new TypeError("Illegal constructor");
      this.#algorithm = Object.freeze({ name: "HMAC", hash: Object.freeze({ name: hash }), length: bytes.length * 8 });
      this.#bytes = bytes;
      this.#extractable = Boolean(extractable);
      this.#usages = Object.freeze(usages);
    }
    get type() { return "secret"; }
    get extractable() { return this.#extractable; }
    get algorithm() { return this.#algorithm; }
    get usages() { return this.#usages; }
    static {
      keyAccess = (key, usage) => {
        if (!(key instanceof CryptoKey)) throw new TypeError("The key is not a CryptoKey");
        if (usage !== "export" && !key.#usages.includes(usage)) {
          throw new DOMException(`The key does not support the "${usage}" operation`, "InvalidAccessError");
        }
        if (usage === "export" && !key.#extractable) {
          throw new DOMException("The key is not extractable", "InvalidAccessError");
        }
        return [key.#algorithm.hash.name, key.#bytes];
      };
    }
  }
  tag(CryptoKey, "CryptoKey");

  const hmacKey = (algorithm, bytes, extractable, usages) => {
    const hash = hashOf(algorithm.hash ?? (() => { throw new TypeError("Algorithm: hash: Missing"); })());
    if (algorithm.length !== undefined) {
      const length = Number(algorithm.length);
      if (length > bytes.length * 8 || length <= bytes.length * 8 - 8) {
        throw new DOMException("Invalid key length", "DataError");
      }
    }
    if (bytes.length === 0) throw new DOMException("Zero-length key is not supported", "DataError");
    return new CryptoKey(making, hash, bytes, extractable, keyUsages(usages, ["sign", "verify"]));
  };
  const copy = (bytes) => new Uint8Array(bytes);
  class SubtleCrypto {
    constructor(token) {
      if (token !== making) throw new TypeError("Illegal constructor");
    }
    async digest(algorithm, data) {
      required(2, arguments.length, "Failed to execute 'digest' on 'SubtleCrypto'");
      const hash = hashOf(algorithm);
      const out = new Uint8Array(HASHES[hash][0]);
      natives.digest(hash, bytesOf(data, "digest: data"), out);
      return out.buffer;
    }
    async importKey(format, keyData, algorithm, extractable, usages) {
      required(5, arguments.length, "Failed to execute 'importKey' on 'SubtleCrypto'");
      isHmac(algorithm);
      if (format === "raw") return hmacKey(algorithm, copy(bytesOf(keyData, "importKey: keyData")), extractable, usages);
      if (format !== "jwk") throw unsupported(`The key format "${format}" for HMAC`);
      if (keyData === null || typeof keyData !== "object") throw new TypeError("importKey: keyData: not a JsonWebKey");
      if (keyData.kty !== "oct") throw new DOMException("Invalid keyData: kty must be \"oct\"", "DataError");
      const key = hmacKey(algorithm, fromBase64url(keyData.k), extractable, usages);
      if (keyData.alg !== undefined && keyData.alg !== JWK_ALGS[key.algorithm.hash.name]) {
        throw new DOMException("Invalid keyData: alg does not match the hash", "DataError");
      }
      if (keyData.ext === false && extractable) {
        throw new DOMException("Invalid keyData: ext is false but the key is extractable", "DataError");
      }
      return key;
    }
    async generateKey(algorithm, extractable, usages) {
      required(3, arguments.length, "Failed to execute 'generateKey' on 'SubtleCrypto'");
      isHmac(algorithm);
      const hash = hashOf(algorithm.hash ?? (() => { throw new TypeError("Algorithm: hash: Missing"); })());
      const bits = algorithm.length === undefined ? HASHES[hash][1] : Number(algorithm.length);
      if (bits === 0) throw new DOMException("The HMAC key length must not be 0", "OperationError");
      if (!Number.isInteger(bits) || bits < 0 || bits % 8 !== 0) {
        throw new TypeError(`The HMAC key length must be a multiple of 8, not ${algorithm.length}`);
      }
      const bytes = new Uint8Array(bits / 8);
      for (let i = 0; i < bytes.length; i += 65536) getRandomValues(bytes.subarray(i, i + 65536));
      return hmacKey({ hash }, bytes, extractable, usages);
    }
    async exportKey(format, key) {
      required(2, arguments.length, "Failed to execute 'exportKey' on 'SubtleCrypto'");
      const [hash, bytes] = keyAccess(key, "export");
      if (format === "raw") return copy(bytes).buffer;
      if (format !== "jwk") throw unsupported(`The key format "${format}" for HMAC`);
      return { key_ops: [...key.usages], ext: true, kty: "oct", k: base64url(bytes), alg: JWK_ALGS[hash] };
    }
    async sign(algorithm, key, data) {
      required(3, arguments.length, "Failed to execute 'sign' on 'SubtleCrypto'");
      isHmac(algorithm);
      const [hash, bytes] = keyAccess(key, "sign");
      const out = new Uint8Array(HASHES[hash][0]);
      natives.hmac(hash, bytes, bytesOf(data, "sign: data"), out);
      return out.buffer;
    }
    async verify(algorithm, key, signature, data) {
      required(4, arguments.length, "Failed to execute 'verify' on 'SubtleCrypto'");
      isHmac(algorithm);
      const [hash, bytes] = keyAccess(key, "verify");
      return natives.hmacVerify(hash, bytes, bytesOf(data, "verify: data"), bytesOf(signature, "verify: signature"));
    }
  }
  for (const method of ["encrypt", "decrypt", "deriveBits", "deriveKey", "wrapKey", "unwrapKey"]) {
    define(SubtleCrypto.prototype, method, {
      async [method]() { throw unsupported(`crypto.subtle.${method}`); },
    }[method]);
  }
  tag(SubtleCrypto, "SubtleCrypto");
  const subtle = new SubtleCrypto(making);

  return {
    URL, URLSearchParams, DOMException, Event, CustomEvent, EventTarget, AbortController, AbortSignal, atob, btoa,
    TextEncoder, TextDecoder, setInterval, clearInterval, queueMicrotask, structuredClone,
    navigator, CryptoKey, SubtleCrypto, subtle,
  };
})

//! The web platform's globals (`web.js`): the same programs run here and in Node (whose
//! implementations are the reference), their JSON compared; and what a hostile program does with
//! them.

use code_runtime::json;
use code_runtime::{CodeRunRequest, RunLimits};

use crate::node::in_node;
use crate::*;

#[track_caller]
fn same_as_node(program: &str) {
    let ours = value(&run(program, vec![])).clone();
    assert_eq!(ours, in_node(program), "{program}");
}

#[test]
fn base64_agrees_with_node() {
    same_as_node(
        r#"const all = Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join("");
const attempt = (f) => { try { return f(); } catch (e) { return [e.name, e.code, e instanceof DOMException]; } };
return [
  btoa(all), atob(btoa(all)) === all, btoa(""), btoa("a"), btoa("ab"), btoa("abc"), btoa(12),
  atob(" YW\nJj\tZA = = ".replace(/ = = $/, "==")), atob("YWJjZA"), atob("YQ"), atob(""),
  attempt(() => atob("YWJjZ")), attempt(() => atob("Y===")), attempt(() => atob("YW*j")),
  attempt(() => btoa("€")), attempt(() => atob("\u0100")), atob("YR=="), atob("YWJ"),
];"#,
    );
}

#[test]
fn urls_agree_with_node() {
    same_as_node(
        r##"const parts = (u) => [u.href, u.origin, u.protocol, u.username, u.password, u.host, u.hostname, u.port, u.pathname, u.search, u.hash];
const parse = (input, base) => { try { return parts(base === undefined ? new URL(input) : new URL(input, base)); } catch (e) { return e.name; } };
const cases = [
  ["https://user:pa ss@EXAMPLE.com:443/a/../b/./c?q=1 2#frag ment"],
  ["http://münchen.de/straße?x=ü"], ["https://xn--mnchen-3ya.de/"], ["http://☃.net/"],
  ["http://0x7f.1/"], ["http://127.1/"], ["http://192.168.0.257/"], ["http://[::ffff:127.0.0.1]:8080/"],
  ["http://example.com:80/"], ["ws://h:81/p"], ["file:///C:/dir/../x.txt"], ["data:text/plain,hi there"],
  ["mailto:a@b.c?subject=hi"], ["javascript:alert(1)"], ["blob:https://example.com/uuid"],
  ["HTTP://EX%41MPLE.COM/%7e%zz?%41#%42"], ["http://example.com/a b/<>\"`{}|\\^"],
  ["../x/y?z", "https://h.com/a/b/c"], ["//other.org/p", "https://h.com/a"], ["?only", "https://h.com/a?b#c"],
  ["#h", "https://h.com/a?b"], ["", "https://h.com/a?b#c"], ["/abs", "https://h.com/a/b"],
  ["https://h.com/\\back\\slash"], ["  https://h.com/trim  "], ["https://h.com/\t\nx"],
  ["not a url"], ["https://"], ["http://a b/"], ["https://h.com:99999/"], ["https://ex ample.com"],
  ["http://[1:2:3]/"], ["x", "not a base"], ["https://h.com/?a=1&a=2&b=%20+c"],
];
const results = cases.map(([input, base]) => parse(input, base));
const u = new URL("https://h.com/p?a=1&b=2#x");
u.searchParams.append("c", "3 4&5");
u.searchParams.delete("a");
const afterParams = u.href;
u.search = "?z=9";
const paramsAfterSearch = [...u.searchParams];
u.hash = "";
u.pathname = "/new path/ü";
u.port = "8443";
u.hostname = "other.org";
u.protocol = "http";
u.username = "me";
u.password = "p@ss";
const setHref = (() => { try { u.href = "nope"; return "set"; } catch (e) { return e.name; } })();
const p = new URLSearchParams("?b=2&a=1&b=1&%E2%82%AC=%zz&sp=a+b&e=");
const order = [...p.keys()];
p.sort();
const sorted = p.toString();
const fromPairs = new URLSearchParams([["x", "1"], ["y", "é & ü"]]).toString();
const fromRecord = new URLSearchParams({ k: "v", n: 1 }).toString();
const special = new URLSearchParams({ q: "a b+c/d?e=f&g#h~!*()'" }).toString();
p.set("b", "only");
return [
  results, afterParams, paramsAfterSearch, u.href, setHref, order, sorted, fromPairs, fromRecord,
  special, p.getAll("b"), p.get("missing"), p.has("a"), p.has("a", "2"), p.size,
  URL.canParse("https://x.y"), URL.canParse("nope"), URL.canParse("/p", "https://x.y"),
  JSON.stringify({ u: new URL("https://x.y/") }), String(new URL("HTTPS://X.Y")),
];"##,
    );
}

#[test]
fn text_encoding_agrees_with_node() {
    same_as_node(
        r#"const enc = new TextEncoder();
const bytes = (s) => Array.from(enc.encode(s));
const dec = (a, o) => new TextDecoder("utf-8", o).decode(new Uint8Array(a));
const into = (s, n) => { const d = new Uint8Array(n); const r = enc.encodeInto(s, d); return [r.read, r.written, Array.from(d)]; };
const fatal = (a) => { try { return dec(a, { fatal: true }); } catch (e) { return e.name; } };
const stream = new TextDecoder();
const smile = Array.from(enc.encode("a😀b"));
const streamed = [stream.decode(new Uint8Array(smile.slice(0, 2)), { stream: true }),
  stream.decode(new Uint8Array(smile.slice(2, 4)), { stream: true }),
  stream.decode(new Uint8Array(smile.slice(4)))];
return [
  enc.encoding, bytes("héllo €😀"), bytes("\ud800"), bytes("a\udc00b"), bytes("\ud83d\ude00"),
  into("héllo", 3), into("😀x", 3), into("😀x", 4), into("", 2),
  dec([0x68, 0xc3, 0xa9]), dec([0xef, 0xbb, 0xbf, 0x61]), dec([0xef, 0xbb, 0xbf, 0x61], { ignoreBOM: true }).length,
  dec([0xf0, 0x80, 0x80]), dec([0xc0, 0x80]), dec([0xed, 0xa0, 0x80]), dec([0xe2, 0x82]), dec([0xff, 0x61, 0xf4, 0x90, 0x80, 0x80]),
  fatal([0x61, 0x80]), fatal([0x61]), streamed,
  new TextDecoder("UTF8").encoding, new TextDecoder(" unicode-1-1-utf-8 ").encoding,
  new TextDecoder().decode(new Uint16Array([0x6968]).buffer),
  new TextDecoder().decode(new DataView(new Uint8Array([0x6f, 0x6b]).buffer)),
  new TextDecoder().decode(),
];"#,
    );
}

#[test]
fn structured_clone_agrees_with_node() {
    same_as_node(
        r#"const cyclic = { name: "root", list: [1, 2] };
cyclic.self = cyclic;
cyclic.list.push(cyclic.list);
const copy = structuredClone(cyclic);
const date = structuredClone(new Date(1700000000000));
const map = structuredClone(new Map([[1, { a: 1 }], ["k", [2]]]));
const set = structuredClone(new Set([1, "x", 1]));
const re = structuredClone(/a+b/gi);
const big = structuredClone(12345678901234567890n);
const typed = structuredClone(new Float64Array([1.5, -0, NaN]));
const error = structuredClone(new RangeError("bad"));
const refused = (v) => { try { structuredClone(v); return "cloned"; } catch (e) { return [e.name, e.code, e instanceof DOMException]; } };
return [
  copy !== cyclic, copy.self === copy, copy.list[2] === copy.list, copy.name,
  date instanceof Date, date.getTime(), [...map.entries()], [...set], re.source, re.flags,
  typeof big, big.toString(), typed.constructor.name, Array.from(typed).map(String),
  error instanceof RangeError, error.message,
  refused(() => 1), refused(Symbol("s")), refused({ f() {} }), structuredClone(undefined) === undefined,
  structuredClone([1, , 3]).length, Object.keys(structuredClone({ b: 1, a: 2 })),
];"#,
    );
}

/// `structuredClone` copies in JavaScript (`web.js`) by the rules of V8's serializer, as Node's
/// (V8's serializer itself) does: getters read once and in order, a property deleted before its
/// turn skipped, class instances as plain objects, `__proto__` an own key, arrays' holes and
/// extra keys, buffers shared between views, resizable buffers, errors (type by name, cause,
/// stack, nothing else), wrappers, and V8's own `DataCloneError` messages for what it refuses
/// (the messages of iterators are left out: Node's older V8 words them otherwise).
#[test]
fn structured_clone_keeps_the_serializers_rules() {
    same_as_node(
        r#"const seen = [];
const watched = { get a() { seen.push("a"); return 1; }, b: 2, get c() { seen.push("c"); delete this.d; return 3; }, d: 4 };
class Point { #secret = 1; constructor() { this.x = 1; } get y() { return 2; } }
const bare = Object.create(null); bare.k = "v";
const proto = JSON.parse('{"__proto__": {"polluted": true}, "n": 1}');
const named = [1, 2, 3]; named.extra = "x";
const sparse = []; sparse[5] = "five"; sparse.tag = 1;
const shared = new ArrayBuffer(8); new Uint8Array(shared).set([1, 2, 3, 4, 5, 6, 7, 8]);
const views = structuredClone([new Uint8Array(shared, 2, 4), new Uint16Array(shared, 0, 2), new DataView(shared, 1, 3)]);
const errorWithCause = new TypeError("outer", { cause: { inner: [1] } });
errorWithCause.extra = "dropped";
const custom = new Error("m"); custom.name = "CustomError";
const bareError = new RangeError();
const cyclicError = new Error("loop"); cyclicError.cause = cyclicError;
const refused = (v, named = true) => { try { structuredClone(v); return "cloned"; } catch (e) { return [e.name, e.code, named ? e.message : "", e instanceof DOMException]; } };

const resizable = new ArrayBuffer(4, { maxByteLength: 16 });
const rc = structuredClone(resizable);
const m = new Map([[{ k: 1 }, "obj"], [NaN, -0]]);
const mc = structuredClone(m);
const wrapperCopies = structuredClone([Object(true), Object(1.5), Object("s"), Object(10n)]);
const sharedRef = { x: 1 }; const pair = structuredClone([sharedRef, sharedRef]);
const e1 = structuredClone(errorWithCause), e2 = structuredClone(custom), e3 = structuredClone(bareError);
const copyWatched = structuredClone(watched);
return JSON.parse(JSON.stringify([
  copyWatched, seen, structuredClone(new Point()), Object.getPrototypeOf(structuredClone(bare)) === Object.prototype,
  structuredClone(proto).polluted, Object.keys(structuredClone(proto)), structuredClone(named).extra, structuredClone(named).length,
  structuredClone(sparse).length, 5 in structuredClone(sparse), 0 in structuredClone(sparse), structuredClone(sparse).tag,
  views[0].buffer === views[1].buffer, views[2].buffer === views[0].buffer, Array.from(views[0]), Array.from(views[1]), views[2].byteOffset, views[2].byteLength,
  e1 instanceof TypeError, e1.message, e1.cause, "extra" in e1, e1.stack === errorWithCause.stack,
  e2.name, e2 instanceof Error, e2.constructor.name, e3.message, Object.hasOwn(e3, "message"),
  rc.resizable, rc.maxByteLength, rc.byteLength,
  [...mc.values()], Object.is([...mc.values()][1], -0), Number.isNaN([...mc.keys()][1]),
  wrapperCopies.map((w) => [typeof w, Object.prototype.toString.call(w), String(w.valueOf())]),
  pair[0] === pair[1],
  structuredClone(new Date(NaN)).getTime(), structuredClone(/x/y).sticky, structuredClone(Object.assign(/z/g, { lastIndex: 3 })).lastIndex,
  refused(() => 1), refused(Symbol("s")), refused(Promise.resolve()), refused(new WeakMap()), refused(new Proxy({}, {})),
  refused(new Map().keys(), false), refused(Object(Symbol("w"))), refused([1, function named() {}]), refused({ a: { b: Symbol.iterator } }),
  refused(globalThis), refused(new WeakRef({})), refused([][Symbol.iterator](), false),
  structuredClone(-0), structuredClone(null), structuredClone("s"), structuredClone(true), structuredClone(12n) === 12n,
  typeof structuredClone(new BigInt64Array([1n]))[0], structuredClone(new Float32Array([1.5])).constructor.name,
  Object.keys(structuredClone({ 2: "b", 1: "a", z: 0, y: 1 }))
]));"#,
    );
}

/// What Node's older V8 cannot compare: an error that is its own cause, detached and shared
/// buffers, a copy made past the program's own setter and frozen `Object.prototype`, and a clone
/// inside a getter of another (one refused there is refused again outside).
#[test]
fn structured_clone_edges() {
    let program = r#"const loop = new Error("loop"); loop.cause = loop;
const copy = structuredClone(loop);
const buffer = new ArrayBuffer(4); const view = new Uint8Array(buffer); buffer.transfer();
const attempt = (f) => { try { f(); return "cloned"; } catch (e) { return [e.name, e.message]; } };
let setterCalls = 0;
Object.defineProperty(Object.prototype, "trap", { set(v) { setterCalls++; }, configurable: true });
const trapped = structuredClone({ trap: 1 });
delete Object.prototype.trap;
const promise = Promise.resolve();
const nested = { get inner() { try { structuredClone(promise); } catch {} return structuredClone({ deep: [1] }); }, p: promise };
const nestedOk = structuredClone({ get inner() { return structuredClone({ deep: [1] }); }, after: { x: 1 } });
Object.freeze(Object.prototype);
const frozen = structuredClone({ constructor: 1, toString: "s" });
return [
  copy.cause === copy, copy.message,
  attempt(() => structuredClone(buffer)), attempt(() => structuredClone(view)),
  setterCalls, Object.hasOwn(trapped, "trap"), trapped.trap,
  attempt(() => structuredClone(nested)), nestedOk,
  Object.hasOwn(frozen, "constructor"), frozen.constructor, frozen.toString,
  attempt(() => structuredClone(new SharedArrayBuffer(4))),
];"#;
    let detached = json!(["DataCloneError", "An ArrayBuffer is detached and could not be cloned."]);
    assert_eq!(
        value(&run(program, vec![])),
        &json!([
            true, "loop", detached, detached, 0, true, 1,
            ["DataCloneError", "#<Promise> could not be cloned."],
            { "inner": { "deep": [1] }, "after": { "x": 1 } },
            true, 1, "s",
            ["DataCloneError", "#<SharedArrayBuffer> could not be cloned."]
        ])
    );
}

#[test]
fn events_and_abort_agree_with_node() {
    same_as_node(
        r#"const log = [];
const target = new EventTarget();
const once = () => log.push("once");
target.addEventListener("ping", (e) => log.push(["first", e.type, e.eventPhase, e.target === target, e.cancelable]));
target.addEventListener("ping", once, { once: true });
target.addEventListener("ping", once, { once: true });
target.addEventListener("ping", { handleEvent(e) { log.push("object"); } });
target.addEventListener("ping", (e) => { log.push("stopper"); e.stopImmediatePropagation(); });
target.addEventListener("ping", () => log.push("never"));
const r1 = target.dispatchEvent(new Event("ping", { cancelable: true }));
const r2 = target.dispatchEvent(new Event("ping"));
const blocker = new EventTarget();
blocker.addEventListener("go", (e) => e.preventDefault());
blocker.addEventListener("go", (e) => log.push(["prevented", e.defaultPrevented]), { passive: true });
const r3 = blocker.dispatchEvent(new Event("go", { cancelable: true }));
const r4 = blocker.dispatchEvent(new Event("go"));
const custom = new CustomEvent("c", { detail: { n: 1 } });
const controller = new AbortController();
const signalled = new EventTarget();
signalled.addEventListener("x", () => log.push("signalled"), { signal: controller.signal });
controller.signal.onabort = (e) => log.push(["onabort", e.type]);
controller.signal.addEventListener("abort", () => log.push("abort listener"));
signalled.dispatchEvent(new Event("x"));
controller.abort();
controller.abort("again");
signalled.dispatchEvent(new Event("x"));
const reason = controller.signal.reason;
const custom2 = new AbortController();
custom2.abort({ why: "mine" });
const thrown = (() => { try { controller.signal.throwIfAborted(); } catch (e) { return [e.name, e.message, e.code]; } })();
const early = AbortSignal.abort();
const any = AbortSignal.any([new AbortController().signal, custom2.signal]);
const later = new AbortController();
const anyLater = AbortSignal.any([later.signal]);
const before = anyLater.aborted;
later.abort("late");
const timeout = AbortSignal.timeout(5);
await new Promise((resolve) => setTimeout(resolve, 40));
const illegal = (() => { try { new AbortSignal(); return "made"; } catch (e) { return e.name; } })();
const dom = new DOMException("m", "NotFoundError");
const plain = new DOMException();
return [
  log, r1, r2, r3, r4, custom.detail, custom instanceof Event, Object.prototype.toString.call(custom),
  [reason.name, reason.message, reason.code, reason instanceof DOMException, reason instanceof Error],
  custom2.signal.reason, thrown, early.aborted, early.reason.name, any.aborted, any.reason,
  before, anyLater.reason, timeout.aborted, timeout.reason.name, timeout.reason.message, illegal,
  [dom.name, dom.message, dom.code, dom instanceof Error, String(dom)], [plain.name, plain.message, plain.code],
  [DOMException.ABORT_ERR, DOMException.DATA_CLONE_ERR, DOMException.INVALID_CHARACTER_ERR, Event.AT_TARGET],
  Object.prototype.toString.call(new AbortController().signal),
];"#,
    );
}

/// A passive listener cannot cancel its event (DOM: the "in passive listener" flag); Node 20
/// lets it, so this one is not compared with Node.
#[test]
fn a_passive_listener_cannot_prevent_the_default() {
    let program = r#"const target = new EventTarget();
let seen;
target.addEventListener("go", (e) => { e.preventDefault(); seen = e.defaultPrevented; }, { passive: true });
const dispatched = target.dispatchEvent(new Event("go", { cancelable: true }));
return [seen, dispatched]"#;
    assert_eq!(value(&run(program, vec![])), &json!([false, true]));
}

#[test]
fn microtasks_and_intervals_agree_with_node() {
    same_as_node(
        r#"const order = [];
setTimeout(() => order.push("timeout"), 0);
queueMicrotask(() => order.push("micro 1"));
Promise.resolve().then(() => order.push("promise"));
queueMicrotask(() => order.push("micro 2"));
order.push("sync");
let ticks = 0;
await new Promise((resolve) => {
  const id = setInterval((a, b) => { ticks += a + b; if (ticks >= 9) { clearInterval(id); resolve(null); } }, 1, 1, 2);
});
let stopped = 0;
const other = setInterval(() => stopped++, 1);
await new Promise((resolve) => setTimeout(resolve, 5));
clearTimeout(other);
const seen = stopped;
await new Promise((resolve) => setTimeout(resolve, 10));
const bad = (() => { try { queueMicrotask(1); } catch (e) { return e.name; } })();
return [order, ticks, stopped === seen, bad, typeof performance.timeOrigin, performance.timeOrigin > 1.6e12];"#,
    );
}

#[test]
fn digests_and_hmac_agree_with_node() {
    same_as_node(
        r#"const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
const failed = async (f) => { try { await f(); return "resolved"; } catch (e) { return e.name; } };
const enc = new TextEncoder();
const s = crypto.subtle;
const kilo = new Uint8Array(1024).map((_, i) => i * 7);
const digests = [];
for (const hash of ["SHA-1", "SHA-256", "SHA-384", "SHA-512", "sha-256", { name: "Sha-1" }]) {
  for (const data of [new Uint8Array(0), enc.encode("abc"), kilo, kilo.buffer, new DataView(kilo.buffer, 3, 100), kilo.subarray(1000)]) {
    digests.push(hex(await s.digest(hash, data)));
  }
}
const key = await s.importKey("raw", enc.encode("key"), { name: "HMAC", hash: "SHA-256" }, true, ["sign", "verify"]);
// RFC 4231, test case 2.
const rfc = await s.importKey("raw", enc.encode("Jefe"), { name: "hmac", hash: { name: "SHA-512" } }, false, ["sign"]);
const long = await s.importKey("raw", new Uint8Array(200).fill(0xaa), { name: "HMAC", hash: "SHA-384" }, true, ["verify"]);
const jwk = await s.importKey("jwk", { kty: "oct", k: "a2V5", alg: "HS256" }, { name: "HMAC", hash: "SHA-256" }, true, ["sign"]);
const signature = await s.sign("HMAC", key, enc.encode("x"));
const generated = await s.generateKey({ name: "HMAC", hash: "SHA-512" }, true, ["sign"]);
const short = await s.generateKey({ name: "HMAC", hash: "SHA-1", length: 64 }, false, ["verify", "sign"]);
const shape = (k) => [k.type, k.extractable, k.algorithm.name, k.algorithm.hash.name, k.algorithm.length, [...k.usages], String(k)];
return [
  digests,
  shape(key), shape(rfc), shape(long), shape(jwk), shape(generated), shape(short),
  hex(await s.sign("HMAC", key, enc.encode("The quick brown fox jumps over the lazy dog"))),
  hex(await s.sign({ name: "HMAC" }, rfc, enc.encode("what do ya want for nothing?"))),
  hex(await s.sign("HMAC", jwk, kilo)),
  hex(await s.sign("HMAC", short, kilo)) !== hex(await s.sign("HMAC", generated, kilo)),
  await s.verify("HMAC", key, signature, enc.encode("x")),
  await s.verify("HMAC", key, signature, enc.encode("y")),
  await s.verify("HMAC", key, new Uint8Array(3), enc.encode("x")),
  await s.verify("HMAC", long, new Uint8Array(48), kilo),
  await s.exportKey("jwk", key), hex(await s.exportKey("raw", key)), (await s.exportKey("raw", generated)).byteLength,
  (await s.exportKey("jwk", generated)).alg,
  await failed(() => s.digest("MD5", kilo)),
  await failed(() => s.digest("SHA-256", "abc")),
  await failed(() => s.digest("SHA-256")),
  await failed(() => s.importKey("raw", kilo, { name: "HMAC", hash: "SHA-256" }, true, [])),
  await failed(() => s.importKey("raw", kilo, { name: "HMAC", hash: "SHA-256" }, true, ["encrypt"])),
  await failed(() => s.importKey("raw", kilo, { name: "HMAC" }, true, ["sign"])),
  await failed(() => s.importKey("raw", new Uint8Array(0), { name: "HMAC", hash: "SHA-256" }, true, ["sign"])),
  await failed(() => s.importKey("raw", kilo, { name: "HMAC", hash: "SHA-256", length: 16 }, true, ["sign"])),
  await failed(() => s.importKey("jwk", { kty: "oct", k: "a2V5", alg: "HS512" }, { name: "HMAC", hash: "SHA-256" }, true, ["sign"])),
  await failed(() => s.importKey("jwk", { kty: "RSA", k: "a2V5" }, { name: "HMAC", hash: "SHA-256" }, true, ["sign"])),
  await failed(() => s.sign("HMAC", rfc, kilo).then(() => s.verify("HMAC", rfc, kilo, kilo))),
  await failed(() => s.sign("HMAC", {}, kilo)),
  await failed(() => s.generateKey({ name: "HMAC", hash: "SHA-1", length: 7 }, true, ["sign"])),
  typeof CryptoKey, typeof SubtleCrypto, s instanceof SubtleCrypto, key instanceof CryptoKey,
  await failed(() => new CryptoKey()), await failed(() => new SubtleCrypto()), String(s),
  crypto.subtle === s, await failed(() => s.generateKey({ name: "HMAC", hash: "SHA-1", length: 0 }, true, ["sign"])),
];"#,
    );
}

/// Where this runtime and Node 20 part: `exportKey` of a key that is not extractable (Node
/// names its error `InvalidAccessException`), an algorithm named with a non-ASCII letter that
/// upper-cases to an ASCII one (Web Crypto matches names ASCII case-insensitively; Node takes
/// `"\u{17f}ha-1"` for SHA-1), and Web Crypto's other algorithms, which Node has and a run
/// refuses by name, saying what it has.
#[test]
fn what_subtle_does_not_have_it_says() {
    let program = r#"const failed = async (f) => { try { await f(); return "resolved"; } catch (e) { return [e.name, e.message]; } };
const key = await crypto.subtle.importKey("raw", new Uint8Array(16), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
return [
  await failed(() => crypto.subtle.exportKey("raw", key)),
  await failed(() => crypto.subtle.encrypt({ name: "AES-GCM", iv: new Uint8Array(12) }, key, new Uint8Array(1))),
  await failed(() => crypto.subtle.importKey("raw", new Uint8Array(16), "AES-GCM", false, ["encrypt"])),
  await failed(() => crypto.subtle.importKey("spki", new Uint8Array(16), { name: "HMAC", hash: "SHA-256" }, false, ["sign"])),
  await failed(() => crypto.subtle.digest("\u017fha-1", new Uint8Array(1))),
];"#;
    let here = "crypto.subtle has digest (SHA-1, SHA-256, SHA-384, SHA-512) and HMAC (generateKey, importKey, exportKey, sign, verify)";
    assert_eq!(
        value(&run(program, vec![])),
        &json!([
            ["InvalidAccessError", "The key is not extractable"],
            ["NotSupportedError", format!("crypto.subtle.encrypt is not supported here: {here}")],
            [
                "NotSupportedError",
                format!("The algorithm \"AES-GCM\" is not supported here: {here}")
            ],
            [
                "NotSupportedError",
                format!("The key format \"spki\" for HMAC is not supported here: {here}")
            ],
            [
                "NotSupportedError",
                format!("The algorithm \"\u{17f}ha-1\" is not supported here: {here}")
            ],
        ])
    );
}

#[test]
fn legacy_encodings_agree_with_node() {
    same_as_node(
        r#"const attempt = (f) => { try { return f(); } catch (e) { return [e.name, e.message]; } };
const d = (label, bytes, options) => attempt(() => new TextDecoder(label, options).decode(new Uint8Array(bytes)));
const streamed = (label, chunks) => {
  const decoder = new TextDecoder(label);
  return [...chunks.map((c) => decoder.decode(new Uint8Array(c), { stream: true })), decoder.decode()];
};
const fatal = new TextDecoder("euc-kr", { fatal: true });
return [
  ["latin1", "ISO-8859-1", " windows-1252\n", "ascii", "utf-16", "UTF-16BE", "sjis", "shift_jis", "euc-jp", "iso-2022-jp",
   "euc-kr", "gbk", "gb2312", "gb18030", "big5", "koi8-r", "iso-8859-2", "windows-1251", "macintosh", "ibm866", "utf8",
   "unicode-1-1-utf-8", "replacement", "iso-2022-kr", "nope", ""].map((l) => attempt(() => new TextDecoder(l).encoding)),
  d("shift_jis", [0x82, 0xa0, 0x93, 0xfa, 0x96, 0x7b]), d("euc-jp", [0xa4, 0xa2, 0xc6, 0xfc]),
  d("euc-kr", [0xc7, 0xd1, 0xb1, 0xdb]), d("gbk", [0xc4, 0xe3, 0xba, 0xc3]), d("gb18030", [0x81, 0x30, 0x81, 0x30]),
  d("big5", [0xa4, 0xa4, 0xa4, 0xe5]), d("koi8-r", [0xc1, 0xc2, 0xd7]), d("windows-1251", [0xcf, 0xf0, 0xe8]),
  d("iso-8859-2", [0xa1, 0xb1]), d("ibm866", [0x80, 0xa0]),
  d("utf-16le", [0xff, 0xfe, 0x41, 0x00, 0x3d, 0xd8, 0x00, 0xde]), d("utf-16be", [0xfe, 0xff, 0x00, 0x41]),
  d("utf-16le", [0xff, 0xfe, 0x41, 0x00], { ignoreBOM: true }), d("utf-16le", [0x41, 0x00, 0x42]),
  d("utf-16le", [0x00, 0xd8, 0x41, 0x00]), d("utf-16le", [0x00, 0xd8, 0x41, 0x00], { fatal: true }),
  d("shift_jis", [0x82, 0xa0, 0x82], { fatal: true }), d("shift_jis", [0x82]), d("shift_jis", [0xff, 0x41]),
  d("iso-2022-jp", [0x1b, 0x24, 0x42, 0x24, 0x22, 0x1b, 0x28, 0x42, 0x41]),
  streamed("shift_jis", [[0x82], [0xa0, 0x41], []]),
  streamed("utf-16le", [[0x3d], [0xd8, 0x00], [0xde]]),
  streamed("utf-16be", [[0xfe], [0xff, 0x00], [0x41, 0xd8]]),
  streamed("iso-2022-jp", [[0x1b, 0x24, 0x42], [0x24, 0x22], [0x24, 0x24, 0x1b, 0x28, 0x42]]),
  streamed("big5", [[0xa4], [0xa4, 0xa4], [0xe5]]),
  [attempt(() => fatal.decode(new Uint8Array([0xc7]))), fatal.decode(new Uint8Array([0xc7, 0xd1])), fatal.fatal, fatal.ignoreBOM, fatal.encoding],
];"#,
    );
}

/// Node 20 decodes `windows-1252` (and its labels `latin1`, `ascii`, ...) as ISO-8859-1 and has
/// no `x-user-defined`; the Encoding Standard (which `encoding_rs` implements) maps 0x80 to `€`.
#[test]
fn single_byte_encodings_follow_the_standard() {
    let program = r#"const d = (label, bytes) => new TextDecoder(label).decode(new Uint8Array(bytes));
return [d("latin1", [0x80, 0x41, 0x9f, 0xe9, 0xff, 0x81]), d("ascii", [0x93, 0x94]), d("x-user-defined", [0x41, 0x80, 0xff]),
  new TextDecoder("x-user-defined").encoding];"#;
    assert_eq!(
        value(&run(program, vec![])),
        &json!(["€AŸéÿ\u{81}", "“”", "A\u{f780}\u{f7ff}", "x-user-defined"])
    );
}

#[test]
fn the_globals_are_there_and_cost_nothing_until_touched() {
    let program = r#"const names = ["URL", "URLSearchParams", "DOMException", "Event", "CustomEvent", "EventTarget", "AbortController",
  "AbortSignal", "atob", "btoa", "TextEncoder", "TextDecoder", "setInterval", "clearInterval",
  "queueMicrotask", "structuredClone", "navigator", "CryptoKey", "SubtleCrypto"];
const before = names.map((n) => typeof Object.getOwnPropertyDescriptor(globalThis, n).get);
const types = names.map((n) => typeof globalThis[n]);
const after = names.map((n) => "value" in Object.getOwnPropertyDescriptor(globalThis, n));
return [before, types, after, navigator.userAgent.startsWith("code-runtime/"), typeof fetch];"#;
    let accessors = format!("[{}]", vec!["\"function\""; 19].join(","));
    let functions = vec!["\"function\""; 16].join(",");
    let types = format!("[{functions},\"object\",\"function\",\"function\"]");
    let values = format!("[{}]", vec!["true"; 19].join(","));
    let expected = format!("[{accessors},{types},{values},true,\"undefined\"]");
    assert_eq!(
        value(&run(program, vec![])),
        &json::parse(&expected).expect("JSON"),
        "each name is an accessor until one is touched; fetch stays absent"
    );
    // A program's own definition wins, before or after the first touch.
    let own = "globalThis.atob = () => 'mine'; const b = btoa('a'); globalThis.btoa = 1; return [atob('YQ=='), b, btoa]";
    assert_eq!(value(&run(own, vec![])), &json!(["mine", "YQ==", 1]));
}

/// Large, deep and odd inputs: the budgets hold and the run ends in a result, the host intact.
/// In `process` isolation, the one for programs nobody vouches for: a single allocation of
/// hundreds of megabytes (a 100 MB `btoa`'s result) is V8's fatal out-of-memory error, which a
/// `thread` isolate's host does not survive (`memory.rs`, `MAX_UNWINDS`).
#[test]
fn hostile_inputs_end_in_results() {
    let runtime = process_runtime(Limits { max_memory_mb: 64, ..Limits::default() });
    for (program, expected) in [
        // 100 MB of text to encode: the run's memory refuses it.
        ("const s = 'x'.repeat(100 * 1024 * 1024); return btoa(s).length", "memory"),
        ("return new TextEncoder().encode('é'.repeat(60 * 1024 * 1024)).length", "memory"),
        // A million levels: V8's serializer checks its stack.
        (
            "let v = {}; for (let i = 0; i < 1_000_000; i++) v = { v }; try { structuredClone(v); return 'cloned' } catch (e) { return e.name }",
            "RangeError",
        ),
        (
            "const a = new Uint8Array(8); return new TextEncoder().encodeInto('x'.repeat(1e6), a).written",
            "8",
        ),
        // Streams of a legacy encoding left open by the million: each is charged to the run.
        (
            "const b = new Uint8Array([0x82]); for (let i = 0; i < 2_000_000; i++) new TextDecoder('shift_jis').decode(b, { stream: true }); return 'held'",
            "memory",
        ),
        // A label of ten million characters names nothing, and is not copied to find that out.
        ("try { new TextDecoder('x'.repeat(1e7)) } catch (e) { return e.name }", "RangeError"),
        // 48 MB to digest and to sign: hashed in place, no copy.
        (
            "const d = new Uint8Array(48 * 1024 * 1024); const k = await crypto.subtle.generateKey({ name: 'HMAC', hash: 'SHA-256' }, false, ['sign']); return [(await crypto.subtle.digest('SHA-512', d)).byteLength, (await crypto.subtle.sign('HMAC', k, d)).byteLength]",
            "[64,32]",
        ),
        // A 64 MB URL: refused by the run's memory, or parsed; never the host's problem.
        (
            "try { return new URL('https://h.com/' + 'a'.repeat(64 * 1024 * 1024)).href.length } catch (e) { return e.name }",
            "url",
        ),
    ] {
        let result = run_on(&runtime, CodeRunRequest::new(program));
        let text = result.to_json();
        match expected {
            // Refused one way or another (a `RangeError`, or the run stopped for its memory).
            "memory" => assert!(result.error().is_some(), "{program}: {text}"),
            // Parsed whole, or refused as a `RangeError` the program caught, or the run stopped
            // for its memory.
            "url" => assert!(
                text.contains("67108878")
                    || text.contains("RangeError")
                    || result.error().is_some(),
                "{program}: {text}"
            ),
            expected => assert!(text.contains(expected), "{program}: {text}"),
        }
    }
    // An event loop of listeners that dispatch to each other ends by the compute budget.
    let looping = "const t = new EventTarget(); t.addEventListener('e', () => queueMicrotask(() => t.dispatchEvent(new Event('e')))); t.dispatchEvent(new Event('e')); await new Promise(() => {});";
    let limited = CodeRunRequest::new(looping)
        .limits(RunLimits { max_wall_ms: Some(500), ..Default::default() });
    let result = run_on(default_runtime(), limited);
    assert!(result.error().is_some(), "{}", result.to_json());
}

#[test]
fn every_run_has_crypto_and_performance_and_the_machines_numbers_differ() {
    let in_a_cell = process_runtime(Limits::default());
    for (runtime, mode) in [(default_runtime(), "thread"), (&in_a_cell, "process")] {
        let program = "return [Math.random(), crypto.randomUUID(), typeof performance.now()]";
        let first = run_on(runtime, CodeRunRequest::new(program));
        let second = run_on(runtime, CodeRunRequest::new(program));
        assert_eq!(value(&first)[2], json!("number"), "{mode}");
        assert_ne!(value(&first)[0], value(&second)[0], "{mode}");
        assert_ne!(value(&first)[1], value(&second)[1], "{mode}");
        let uuid = value(&first)[1].as_str().unwrap().to_owned();
        assert_eq!((uuid.len(), &uuid[14..15]), (36, "4"), "{mode}: {uuid}");
        let refused =
            run_on(runtime, CodeRunRequest::new("crypto.getRandomValues(new Float64Array(2))"));
        assert!(refused.error().unwrap().message().contains("integer typed array"), "{mode}");
    }
}

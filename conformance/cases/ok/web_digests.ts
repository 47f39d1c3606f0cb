// The same digests and MACs as Python's hashlib and hmac.
const hex = (b: ArrayBuffer) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
const data = new TextEncoder().encode("The quick brown fox jumps over the lazy dog");
const out: Record<string, string> = {};
for (const name of ["SHA-1", "SHA-256", "SHA-384", "SHA-512"]) {
  out[name] = hex(await crypto.subtle.digest(name, data));
}
const key = await crypto.subtle.importKey("raw", new TextEncoder().encode("key"), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
const mac = await crypto.subtle.sign("HMAC", key, data);
out["HMAC-SHA-256"] = hex(mac);
console.log("verified", await crypto.subtle.verify("HMAC", key, mac, data));
return out;

# The same digests and MACs as TypeScript's crypto.subtle.
import hashlib
import hmac

data = "The quick brown fox jumps over the lazy dog".encode()
out = {}
for name in ["SHA-1", "SHA-256", "SHA-384", "SHA-512"]:
    out[name] = hashlib.new(name.replace("-", "").lower(), data).hexdigest()
mac = hmac.new(b"key", data, hashlib.sha256).digest()
out["HMAC-SHA-256"] = mac.hex()
print("verified", str(hmac.compare_digest(mac, hmac.new(b"key", data, "sha256").digest())).lower())
return out

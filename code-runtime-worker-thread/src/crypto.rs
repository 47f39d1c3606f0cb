//! The natives under `crypto.subtle` (`web.js`): the SHA digests and HMAC, by RustCrypto's
//! `sha1`, `sha2` and `hmac` (the same `hmac` and `sha2` that sign checkpoints). `web.js` checks
//! the algorithms, keys and usages, as Web Crypto says; these compute, over bytes the program's
//! own arrays hold, into an array `web.js` made (so the run's allocator meters it).

use hmac::{EagerHash, Hmac, KeyInit, Mac};
use sha2::Digest;

use crate::native;

/// A hash Web Crypto names: `"SHA-1"`, `"SHA-256"`, `"SHA-384"`, `"SHA-512"` (`web.js` passes
/// the canonical spelling).
#[derive(Clone, Copy)]
enum Hash {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    fn named(name: &str) -> Option<Self> {
        Some(match name {
            "SHA-1" => Self::Sha1,
            "SHA-256" => Self::Sha256,
            "SHA-384" => Self::Sha384,
            "SHA-512" => Self::Sha512,
            _ => return None,
        })
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Self::Sha256 => sha2::Sha256::digest(data).to_vec(),
            Self::Sha384 => sha2::Sha384::digest(data).to_vec(),
            Self::Sha512 => sha2::Sha512::digest(data).to_vec(),
        }
    }

    fn mac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha1 => mac::<sha1::Sha1>(key, data),
            Self::Sha256 => mac::<sha2::Sha256>(key, data),
            Self::Sha384 => mac::<sha2::Sha384>(key, data),
            Self::Sha512 => mac::<sha2::Sha512>(key, data),
        }
    }
}

fn mac<D: EagerHash>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length (a long one is hashed first), so this cannot fail.
    let Ok(mut mac) = <Hmac<D> as KeyInit>::new_from_slice(key) else { return Vec::new() };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// `digest(hash, data, out)`: the hash of `data`'s bytes into `out` (as long as the hash).
pub(crate) fn digest(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    _rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(hash) = hash_of(scope, args.get(0)) else { return };
    let Some(data) = view(scope, args.get(1)) else { return };
    let mut storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let sum = hash.digest(data.get_contents(&mut storage));
    fill(scope, args.get(2), &sum);
}

/// `hmac(hash, key, data, out)`: HMAC of `data` under `key` into `out`.
pub(crate) fn hmac(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    _rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(hash) = hash_of(scope, args.get(0)) else { return };
    let (Some(key), Some(data)) = (view(scope, args.get(1)), view(scope, args.get(2))) else {
        return;
    };
    let mut key_storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let mut data_storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let sum = hash.mac(key.get_contents(&mut key_storage), data.get_contents(&mut data_storage));
    fill(scope, args.get(3), &sum);
}

/// `hmacVerify(hash, key, data, signature)`: whether `signature` is `data`'s HMAC under `key`,
/// compared in constant time.
pub(crate) fn hmac_verify(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(hash) = hash_of(scope, args.get(0)) else { return };
    let (Some(key), Some(data), Some(signature)) =
        (view(scope, args.get(1)), view(scope, args.get(2)), view(scope, args.get(3)))
    else {
        return;
    };
    let mut key_storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let mut data_storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let mut signature_storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let key = key.get_contents(&mut key_storage);
    let data = data.get_contents(&mut data_storage);
    let signature = signature.get_contents(&mut signature_storage);
    let verified = match hash {
        Hash::Sha1 => verify::<sha1::Sha1>(key, data, signature),
        Hash::Sha256 => verify::<sha2::Sha256>(key, data, signature),
        Hash::Sha384 => verify::<sha2::Sha384>(key, data, signature),
        Hash::Sha512 => verify::<sha2::Sha512>(key, data, signature),
    };
    rv.set(v8::Boolean::new(scope, verified).into());
}

fn verify<D: EagerHash>(key: &[u8], data: &[u8], signature: &[u8]) -> bool {
    let Ok(mut mac) = <Hmac<D> as KeyInit>::new_from_slice(key) else { return false };
    mac.update(data);
    // Constant time, and false for a signature of another length.
    mac.verify_slice(signature).is_ok()
}

fn hash_of(scope: &mut v8::PinScope<'_, '_>, name: v8::Local<'_, v8::Value>) -> Option<Hash> {
    let name = name.to_rust_string_lossy(scope);
    let hash = Hash::named(&name);
    if hash.is_none() {
        native::throw(scope, &format!("crypto.subtle: no hash named {name:?}"), false);
    }
    hash
}

fn view<'s>(
    scope: &mut v8::PinScope<'_, '_>,
    value: v8::Local<'s, v8::Value>,
) -> Option<v8::Local<'s, v8::Uint8Array>> {
    let view = v8::Local::<v8::Uint8Array>::try_from(value).ok();
    if view.is_none() {
        native::throw(scope, "crypto.subtle: the bytes are not a Uint8Array", false);
    }
    view
}

/// `bytes` into the `Uint8Array` `out`, which must be exactly as long.
fn fill(scope: &mut v8::PinScope<'_, '_>, out: v8::Local<'_, v8::Value>, bytes: &[u8]) {
    let Ok(out) = v8::Local::<v8::Uint8Array>::try_from(out) else {
        return native::throw(scope, "crypto.subtle: the result is not a Uint8Array", false);
    };
    if out.byte_length() != bytes.len() {
        return native::throw(scope, "crypto.subtle: the result has the wrong length", true);
    }
    native::write_into(scope, out, |_, target| target.copy_from_slice(bytes));
}

//! What the natives under the web platform's globals share (`web.rs`, `encoding.rs`,
//! `crypto.rs`): throwing the program's errors, and writing into a byte array the program made.

/// Throws a `RangeError` (`range`) or a `TypeError` with `message` in the program.
pub(crate) fn throw(scope: &mut v8::PinScope<'_, '_>, message: &str, range: bool) {
    let message = v8::String::new(scope, message).unwrap_or_else(|| v8::String::empty(scope));
    let error = if range {
        v8::Exception::range_error(scope, message)
    } else {
        v8::Exception::type_error(scope, message)
    };
    scope.throw_exception(error);
}

/// Calls `write` with the bytes `view` covers, writable; `None` when it covers none (empty, or
/// its buffer detached).
pub(crate) fn write_into<'s, 'i, R>(
    scope: &mut v8::PinScope<'s, 'i>,
    view: v8::Local<'_, v8::Uint8Array>,
    write: impl FnOnce(&mut v8::PinScope<'s, 'i>, &mut [u8]) -> R,
) -> Option<R> {
    let (offset, length) = (view.byte_offset(), view.byte_length());
    let buffer = view.buffer(scope)?;
    let store = buffer.get_backing_store();
    let data = store.data().filter(|_| length > 0)?;
    // SAFETY: `store` keeps the buffer's memory alive for this call; `offset + length` is
    // within it (V8 keeps a view within its buffer, and a detached buffer has a zero length,
    // excluded above); this thread is the isolate's, and `write` runs no JavaScript (it only
    // writes bytes), so nothing else reads or writes the slice while it lives.
    let target =
        unsafe { std::slice::from_raw_parts_mut(data.as_ptr().cast::<u8>().add(offset), length) };
    Some(write(scope, target))
}

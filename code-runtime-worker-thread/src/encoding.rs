//! The Encoding Standard's labels and its encodings other than UTF-8 (`TextDecoder("latin1")`,
//! `"shift_jis"`, `"utf-16le"`, ...), by `encoding_rs`: natives under `web.js`'s `TextDecoder`
//! (UTF-8 itself has its own natives in `web.rs`, over V8's decoder).
//!
//! A streaming decoder's state (a character split across chunks, ISO-2022-JP's mode) lives here,
//! in the run's state under an id the `TextDecoder` holds, until its stream ends; each one held
//! is charged to the run's memory.

use encoding_rs::{Decoder, DecoderResult, Encoding};

use crate::native;
use crate::state::{self, Run};

/// No label is longer (the longest is `"csisolatin1"`'s kin at about twenty characters): a longer
/// string names nothing, and is not copied out of the isolate to find that out.
const MAX_LABEL: usize = 64;

/// What one held decoder is charged: the decoder and its map entry, generously.
const HELD: usize = 2 * std::mem::size_of::<encoding_rs::Decoder>() + 64;

/// `encoding(label)`: the name of the encoding `label` names, lowercase as `TextDecoder`'s
/// `encoding` reads (`"replacement"`, which `TextDecoder` refuses, included), or `null` when it
/// names none.
pub(crate) fn encoding(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(label) = args.get(0).to_string(scope) else { return };
    let found = (label.length() <= MAX_LABEL)
        .then(|| Encoding::for_label(label.to_rust_string_lossy(scope).as_bytes()))
        .flatten();
    match found.and_then(|found| v8::String::new(scope, &found.name().to_ascii_lowercase())) {
        Some(name) => rv.set(name.into()),
        None => rv.set_null(),
    }
}

/// `decodeAs(name, bytes, fatal, ignoreBOM, stream, id)`: `bytes` decoded from the encoding
/// `name`, continuing the stream `id` holds (0: a new one), as `[text, id]`: `text` is `null`
/// when `fatal` and the bytes are malformed; `id` is the stream to continue (0 when `stream`
/// is false: the stream ended).
pub(crate) fn decode_as(
    scope: &mut v8::PinScope<'_, '_>,
    args: v8::FunctionCallbackArguments<'_>,
    mut rv: v8::ReturnValue<'_, v8::Value>,
) {
    let Some(run) = state::of(scope) else { return };
    let name = args.get(0).to_rust_string_lossy(scope);
    let Some(encoding) = Encoding::for_label(name.as_bytes()) else {
        return native::throw(scope, "decodeAs: no such encoding", false);
    };
    let Ok(bytes) = v8::Local::<v8::Uint8Array>::try_from(args.get(1)) else {
        return native::throw(scope, "decodeAs: not a Uint8Array", false);
    };
    let fatal = args.get(2).boolean_value(scope);
    let ignore_bom = args.get(3).boolean_value(scope);
    let stream = args.get(4).boolean_value(scope);
    let id = args.get(5).uint32_value(scope).unwrap_or(0);
    let mut decoder = taken(&run, id).unwrap_or_else(|| {
        if ignore_bom {
            encoding.new_decoder_without_bom_handling()
        } else {
            encoding.new_decoder_with_bom_removal()
        }
    });
    let mut storage = [0u8; v8::TYPED_ARRAY_MAX_SIZE_IN_HEAP];
    let source = bytes.get_contents(&mut storage);
    let Some(capacity) = decoder.max_utf16_buffer_length(source.len()) else {
        return native::throw(scope, "TextDecoder: the text is longer than a string can be", true);
    };
    let charged = capacity.saturating_mul(2);
    if !run.bounds.budget.reserve_host(charged) {
        return native::throw(
            scope,
            "TextDecoder: the text does not fit in the run's memory",
            true,
        );
    }
    let mut units = vec![0u16; capacity];
    let last = !stream;
    let written = if fatal {
        match decoder.decode_to_utf16_without_replacement(source, &mut units, last) {
            (DecoderResult::InputEmpty, _, written) => Some(written),
            // The output had room for the worst case, so only malformed input stops it.
            (DecoderResult::Malformed(..) | DecoderResult::OutputFull, _, _) => None,
        }
    } else {
        Some(decoder.decode_to_utf16(source, &mut units, last).2)
    };
    let text = written.map(|written| {
        v8::String::new_from_two_byte(scope, &units[..written], v8::NewStringType::Normal)
    });
    drop(units);
    run.bounds.budget.release_host(charged);
    let text = match text {
        None => v8::null(scope).into(),
        Some(Some(text)) => text.into(),
        Some(None) => {
            return native::throw(
                scope,
                "TextDecoder: the text is longer than a string can be",
                true,
            );
        }
    };
    let next = if stream && written.is_some() {
        let Some(id) = held(&run, decoder) else {
            return native::throw(
                scope,
                "TextDecoder: the stream does not fit in the run's memory",
                true,
            );
        };
        id
    } else {
        0
    };
    let pair = [text, v8::Integer::new_from_unsigned(scope, next).into()];
    rv.set(v8::Array::new_with_elements(scope, &pair).into());
}

/// The decoder of the stream `id` (0: none), no longer held.
fn taken(run: &Run, id: u32) -> Option<Decoder> {
    let decoder = (id != 0).then(|| run.state.borrow_mut().decoders.remove(&id)).flatten()?;
    run.bounds.budget.release_host(HELD);
    Some(decoder)
}

/// Holds `decoder` for its stream's next chunk, charged to the run's memory: its id, or `None`
/// when the run's memory refuses it.
fn held(run: &Run, decoder: Decoder) -> Option<u32> {
    if !run.bounds.budget.reserve_host(HELD) {
        return None;
    }
    let mut state = run.state.borrow_mut();
    state.next_decoder = state.next_decoder.wrapping_add(1).max(1);
    let id = state.next_decoder;
    state.decoders.insert(id, decoder);
    Some(id)
}

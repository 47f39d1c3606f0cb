//! Lossless JSON: the one owned value type that crosses between a program and the host
//! ([`JsonValue`]), the one definition of what may cross (lossless), and the walks over it
//! (validate, meter, encode, parse).
//!
//! A [`JsonValue`] is *lossless* when a JavaScript program, a Python program and the host all read
//! it as the same value:
//!
//! - numbers are finite, not `-0`, and integers are exactly representable as an IEEE-754 double
//!   (`2^60` is fine, `2^53 + 1` is not);
//! - strings are valid Unicode: a Rust `String` cannot hold a lone surrogate, so providers convert
//!   engine strings through [`string_from_utf16`], which refuses one;
//! - depth is unbounded.
//!
//! Because depth is unbounded, nothing here recurses, and the rule is the type's, not its
//! callers': [`JsonValue`]'s `Drop`, `Clone`, `PartialEq`, `Debug` and `Display` keep explicit
//! stacks on the heap, as do [`validate`], [`encoded_len`], [`encode`], [`parse`],
//! [`held_bytes`] and [`shrink`]. A value nested 1 000 000 levels deep is built, copied, compared, printed and
//! dropped without touching the call stack. serde's data model nests one call per level, so
//! `Serialize` writes a container deeper than [`SERDE_DEPTH`] as one raw JSON text and
//! `Deserialize` refuses one; `serde_json::Value`, whose own `Drop` and `Clone` recurse, is met
//! only at the consumer edge, through [`JsonValue::to_serde_json`] (bounded) and
//! `JsonValue::from(serde_json::Value)` (iterative).
//!
//! Build values with the [`json!`](crate::json!) macro (`serde_json::json!`'s syntax;
//! interpolated expressions are converted with [`ToJson`], or serialized), and read typed data out
//! of one with [`from_value`].

mod encode;
mod literal;
mod parse;
mod serialization;
mod shrink;
mod value;

pub use serde_json::Number;

pub use crate::encode::{NumberSpelling, encode, encode_into, encode_with, quote};
pub use crate::literal::ToJson;
pub use crate::parse::{ParseError, parse, parse_strict, parse_within};
pub use crate::serialization::{FromValueError, from_value, to_value};
pub use crate::shrink::shrink;
pub use crate::value::{JsonArray, JsonIndex, JsonMap, JsonValue, TooDeep};

#[doc(hidden)]
pub mod __private {
    pub use crate::literal::{Interpolated, ViaSerialize, ViaToJson};
}

/// The deepest container serde's data model sees: `Serialize` writes anything deeper as one raw
/// JSON text, `Deserialize` and [`from_value`] refuse it, and [`JsonValue::to_serde_json`]
/// refuses it. 128 is `serde_json`'s own parsing limit, so every value `serde_json` can read
/// passes; one call per level of 128 levels is a few kilobytes of stack.
pub const SERDE_DEPTH: usize = 128;

/// What [`held_bytes`] counts for every value: its slot in its parent (or its root).
pub const VALUE_BYTES: usize = std::mem::size_of::<JsonValue>();

/// What [`held_bytes`] counts for an object beyond its slot: the boxed map.
pub const OBJECT_BYTES: usize = 96;

/// What [`held_bytes`] counts for an object member beyond its key's text and its value: the key's
/// `String` and the map's hash and index entries.
pub const MEMBER_BYTES: usize = 48;

/// The host memory `value` holds, in the model the host's meter charges a run for what it holds
/// on the run's behalf: [`VALUE_BYTES`] per value, [`OBJECT_BYTES`] per object, [`MEMBER_BYTES`]
/// plus the key's length per member, and every string's length. Vectors' spare capacity and the
/// allocator's rounding are not counted, so the real figure may be up to twice this.
///
/// Runs in stack space independent of the depth of `value`.
pub fn held_bytes(value: &JsonValue) -> usize {
    let mut total = 0usize;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        total = total.saturating_add(VALUE_BYTES);
        match value {
            JsonValue::String(text) => total = total.saturating_add(text.len()),
            JsonValue::Array(items) => stack.extend(items.iter()),
            JsonValue::Object(members) => {
                total = total.saturating_add(OBJECT_BYTES);
                for (key, item) in members.iter() {
                    total = total.saturating_add(MEMBER_BYTES + key.len());
                    stack.push(item);
                }
            }
            JsonValue::Null | JsonValue::Bool(_) | JsonValue::Number(_) => {}
        }
    }
    total
}

/// Why a value is not lossless JSON.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LossyJson {
    /// `NaN` or an infinity.
    #[error("number is not finite")]
    NonFinite,
    /// `-0`: it would read back as `0`.
    #[error("number is negative zero")]
    NegativeZero,
    /// An integer a double cannot hold exactly, such as `2^53 + 1`.
    #[error("integer {0} is not exactly representable as a double")]
    InexactInteger(String),
    /// A UTF-16 string with an unpaired surrogate.
    #[error("string contains a lone surrogate")]
    LoneSurrogate,
}

/// Checks that `value` is lossless JSON (see the module docs).
///
/// Runs in time linear in the size of `value` and stack space independent of its depth.
///
/// # Errors
///
/// Returns the first [`LossyJson`] reason found; which one is reported when several numbers are
/// lossy is unspecified.
pub fn validate(value: &JsonValue) -> Result<(), LossyJson> {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            JsonValue::Number(number) => check_number(number)?,
            JsonValue::Array(items) => stack.extend(items.iter()),
            JsonValue::Object(map) => stack.extend(map.values()),
            JsonValue::Null | JsonValue::Bool(_) | JsonValue::String(_) => {}
        }
    }
    Ok(())
}

/// Converts a double into a JSON number, in the canonical form providers use.
///
/// Integral doubles that fit an `i64` or `u64` become integer numbers, so a program's `1` equals
/// `json!(1)` on the host; every other finite double stays a float.
///
/// # Errors
///
/// [`LossyJson::NonFinite`] for `NaN` and infinities, [`LossyJson::NegativeZero`] for `-0`.
pub fn number_from_f64(value: f64) -> Result<Number, LossyJson> {
    if !value.is_finite() {
        return Err(LossyJson::NonFinite);
    }
    if value == 0.0 && value.is_sign_negative() {
        return Err(LossyJson::NegativeZero);
    }
    // 2^63 and 2^64 as doubles: the first integral doubles outside `i64` and `u64`. The casts below
    // are exact because `value` is integral and strictly inside the target range.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    if value.fract() == 0.0 {
        if (-TWO_POW_63..TWO_POW_63).contains(&value) {
            return Ok(Number::from(value as i64));
        }
        if (0.0..TWO_POW_64).contains(&value) {
            return Ok(Number::from(value as u64));
        }
    }
    // Finite, so `from_f64` cannot refuse it.
    Number::from_f64(value).ok_or(LossyJson::NonFinite)
}

/// Converts UTF-16 code units (a JavaScript or Python string) into a `String`.
///
/// # Errors
///
/// [`LossyJson::LoneSurrogate`] when the units contain an unpaired surrogate: docs/design.md §9 makes
/// such strings non-lossless instead of silently replacing them with U+FFFD.
pub fn string_from_utf16(units: &[u16]) -> Result<String, LossyJson> {
    String::from_utf16(units).map_err(|_| LossyJson::LoneSurrogate)
}

/// The UTF-8 size of `value` as compact JSON, or `None` if it is larger than `budget`.
///
/// This is exactly `encode(value).len()` without building the encoding, and it stops as soon as
/// the running total passes `budget`, so metering a huge value against a small budget is cheap.
/// Numbers are counted in ECMAScript spelling (`1e+21`, `1152921504606847000` for 2^60).
pub fn encoded_len(value: &JsonValue, budget: usize) -> Option<usize> {
    let mut total = 0usize;
    let mut stack = vec![value];
    let mut spelling = ryu_js::Buffer::new();
    while let Some(value) = stack.pop() {
        let room = budget - total;
        let cost = match value {
            JsonValue::Null => 4,
            JsonValue::Bool(true) => 4,
            JsonValue::Bool(false) => 5,
            JsonValue::Number(number) => encode::spell_number(&mut spelling, number).len(),
            JsonValue::String(text) => string_len_within(text, room)?,
            JsonValue::Array(items) => {
                // Brackets and commas. Every element costs at least one byte more, so a too-long
                // array is over before any element is pushed.
                let cost = 2 + items.len().saturating_sub(1);
                if cost.saturating_add(items.len()) > room {
                    return None;
                }
                stack.extend(items);
                cost
            }
            JsonValue::Object(map) => {
                // Braces, commas, and one colon per entry. Every entry costs at least four bytes
                // (`"":0`), so a too-large object is over before any key is measured.
                let mut cost = 2 + map.len().saturating_sub(1) + map.len();
                if (2 + map.len().saturating_sub(1)).saturating_add(4 * map.len()) > room {
                    return None;
                }
                for (key, item) in map {
                    cost = cost.checked_add(string_len_within(key, room)?)?;
                    if cost > room {
                        return None;
                    }
                    stack.push(item);
                }
                cost
            }
        };
        if cost > room {
            return None;
        }
        total += cost;
    }
    Some(total)
}

/// Whether `value` nests more than `limit` arrays and objects deep (a scalar is depth 0, `[]` and
/// `[1]` depth 1). Stops at the first container past the limit; uses no call stack per level.
pub fn nests_deeper_than(value: &JsonValue, limit: usize) -> bool {
    // Each entry is a value and the number of containers around it.
    let mut stack = vec![(value, 0usize)];
    while let Some((value, around)) = stack.pop() {
        let inside = around + 1;
        match value {
            JsonValue::Array(_) | JsonValue::Object(_) if inside > limit => return true,
            JsonValue::Array(items) => stack.extend(items.iter().map(|item| (item, inside))),
            JsonValue::Object(map) => stack.extend(map.values().map(|item| (item, inside))),
            JsonValue::Null | JsonValue::Bool(_) | JsonValue::Number(_) | JsonValue::String(_) => {}
        }
    }
    false
}

/// The UTF-8 size of `text` as a JSON string literal, quotes included (docs/reference.md Appendix A).
pub fn string_len(text: &str) -> usize {
    2 + text.bytes().map(escaped_byte_len).sum::<usize>()
}

/// The longest prefix of `text`, cut at a `char` boundary, whose JSON string literal (quotes
/// included) is at most `budget` bytes. Empty when `budget < 2`.
///
/// Runs in time proportional to the prefix, never to `text`, and allocates nothing.
pub fn truncate(text: &str, budget: usize) -> &str {
    let Some(mut room) = budget.checked_sub(2) else {
        return "";
    };
    let mut end = 0;
    for (index, c) in text.char_indices() {
        let cost = if c.is_ascii() { escaped_byte_len(c as u8) } else { c.len_utf8() };
        if cost > room {
            break;
        }
        room -= cost;
        end = index + c.len_utf8();
    }
    &text[..end]
}

/// The part of a log line a substrate sends when the line alone is over the output budget
/// `max_output_bytes`: the shortest prefix whose JSON string (quotes aside) is over it, so the
/// ledger reports the same `output-limit` (and keeps the same prefix of it) as it would for the
/// whole line, and nothing longer crosses. A line within the budget is returned whole. The
/// Python child's bootstrap applies the same rule (`_clip`); the V8 isolate applies this one.
pub fn clip_log(line: &str, max_output_bytes: usize) -> &str {
    let Some(fits) = max_output_bytes.checked_add(2) else { return line };
    if string_len(line) <= fits {
        return line;
    }
    // The longest prefix that fits, and one character more.
    let kept = truncate(line, fits).len();
    let next = line[kept..].chars().next().map_or(0, char::len_utf8);
    &line[..kept + next]
}

/// [`string_len`], or `None` as soon as it is known to exceed `budget`.
fn string_len_within(text: &str, budget: usize) -> Option<usize> {
    // Every byte costs at least one, so a text longer than the budget needs no scan.
    if text.len().checked_add(2)? > budget {
        return None;
    }
    let len = string_len(text);
    (len <= budget).then_some(len)
}

/// What one UTF-8 byte of a string costs inside a JSON string literal. Non-ASCII bytes are written
/// raw, so a multi-byte character costs its UTF-8 length.
pub(crate) fn escaped_byte_len(byte: u8) -> usize {
    match byte {
        b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => 2,
        0x00..=0x1F => 6,
        _ => 1,
    }
}

pub(crate) fn check_number(number: &Number) -> Result<(), LossyJson> {
    let exact = if let Some(unsigned) = number.as_u64() {
        u64_is_exact(unsigned)
    } else if let Some(signed) = number.as_i64() {
        u64_is_exact(signed.unsigned_abs())
    } else {
        let double = number.as_f64().ok_or(LossyJson::NonFinite)?;
        if !double.is_finite() {
            return Err(LossyJson::NonFinite);
        }
        if double == 0.0 && double.is_sign_negative() {
            return Err(LossyJson::NegativeZero);
        }
        true
    };
    if exact { Ok(()) } else { Err(LossyJson::InexactInteger(number.to_string())) }
}

fn u64_is_exact(value: u64) -> bool {
    const TWO_POW_53: u64 = 1 << 53;
    if value <= TWO_POW_53 {
        return true;
    }
    // `value as f64` rounds to nearest; it is exact iff converting back gives `value`. 2^64 itself
    // is out of range for the way back (the cast would saturate and compare equal to u64::MAX).
    let double = value as f64;
    double < 18_446_744_073_709_551_616.0 && double as u64 == value
}

//! Lossless JSON: the one definition of what may cross between a program and the host, and the
//! iterative walks over it (validate, meter, encode, drop).
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
//! Because depth is unbounded, every walk here keeps an explicit stack on the heap. A value nested
//! 100 000 levels deep is validated, metered, encoded and dropped without touching the call stack.
//! `serde_json`'s own `Clone`, `PartialEq`, `Debug`, `Serialize` and `Drop` for [`JsonValue`] are
//! recursive; see [`drop_value`] for the one that matters most to a host.

use serde_json::Number;

/// A JSON value as it crosses the seam: `serde_json::Value` with insertion-ordered objects.
///
/// Object keys keep the order in which the program produced them (the workspace enables
/// `serde_json`'s `preserve_order`), so `{b: 1, a: 2}` comes back as `{"b":1,"a":2}`.
pub type JsonValue = serde_json::Value;

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
            JsonValue::Array(items) => stack.extend(items),
            JsonValue::Object(map) => stack.extend(map.values()),
            JsonValue::Null | JsonValue::Bool(_) | JsonValue::String(_) => {}
        }
    }
    Ok(())
}

/// Converts a double into a JSON number, in the canonical form providers use.
///
/// Integral doubles that fit an `i64` or `u64` become integer numbers, so a program's `1` equals
/// `serde_json::json!(1)` on the host; every other finite double stays a float.
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
/// [`LossyJson::LoneSurrogate`] when the units contain an unpaired surrogate: DESIGN.md §9 makes
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
            JsonValue::Number(number) => spell_number(&mut spelling, number).len(),
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

/// Encodes `value` as compact JSON, exactly as JavaScript's `JSON.stringify` spells it.
///
/// Numbers use ECMAScript `Number::toString` spelling; strings escape `"`, `\` and the C0 controls
/// (`\b \t \n \f \r`, others as lower-case `\u00XX`) and keep everything else raw, including U+2028
/// and U+2029. The value is assumed lossless (see [`validate`]); an inexact integer is spelled as the
/// double nearest to it.
pub fn encode(value: &JsonValue) -> String {
    let mut out = String::new();
    encode_into(value, &mut out);
    out
}

/// [`encode`] appending to `out`.
pub fn encode_into(value: &JsonValue, out: &mut String) {
    // Work items in reverse order of output: popping yields them left to right.
    enum Step<'a> {
        Value(&'a JsonValue),
        Key(&'a str),
        Punct(char),
    }
    let mut stack = vec![Step::Value(value)];
    let mut spelling = ryu_js::Buffer::new();
    while let Some(step) = stack.pop() {
        match step {
            Step::Punct(c) => out.push(c),
            Step::Key(key) => {
                write_string(key, out);
                out.push(':');
            }
            Step::Value(JsonValue::Null) => out.push_str("null"),
            Step::Value(JsonValue::Bool(true)) => out.push_str("true"),
            Step::Value(JsonValue::Bool(false)) => out.push_str("false"),
            Step::Value(JsonValue::Number(number)) => {
                out.push_str(spell_number(&mut spelling, number));
            }
            Step::Value(JsonValue::String(text)) => write_string(text, out),
            Step::Value(JsonValue::Array(items)) => {
                out.push('[');
                stack.push(Step::Punct(']'));
                for (index, item) in items.iter().enumerate().rev() {
                    stack.push(Step::Value(item));
                    if index > 0 {
                        stack.push(Step::Punct(','));
                    }
                }
            }
            Step::Value(JsonValue::Object(map)) => {
                out.push('{');
                stack.push(Step::Punct('}'));
                for (index, (key, item)) in map.iter().enumerate().rev() {
                    stack.push(Step::Value(item));
                    stack.push(Step::Key(key));
                    if index > 0 {
                        stack.push(Step::Punct(','));
                    }
                }
            }
        }
    }
}

/// `text` as a JSON string literal, quotes included (the spelling [`encode`] uses).
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_string(text, &mut out);
    out
}

/// Drops `value` without recursion.
///
/// `serde_json::Value`'s own `Drop` recurses once per nesting level, so dropping a value nested
/// about 100 000 deep overflows a 2 MiB thread stack. Providers and hosts that hold values built
/// by a program (completions, binding arguments) drop them through here;
/// [`CodeRunResult`](crate::CodeRunResult) does so for its value automatically.
pub fn drop_value(value: JsonValue) {
    fn is_container(value: &JsonValue) -> bool {
        matches!(value, JsonValue::Array(_) | JsonValue::Object(_))
    }
    if !is_container(&value) {
        return;
    }
    let mut stack = vec![value];
    while let Some(mut value) = stack.pop() {
        // Move the children out, so `value` itself is dropped shallow at the end of this turn.
        match &mut value {
            JsonValue::Array(items) => stack.extend(items.drain(..).filter(is_container)),
            JsonValue::Object(map) => stack
                .extend(std::mem::take(map).into_iter().map(|(_, item)| item).filter(is_container)),
            JsonValue::Null | JsonValue::Bool(_) | JsonValue::Number(_) | JsonValue::String(_) => {}
        }
    }
}

/// The UTF-8 size of `text` as a JSON string literal, quotes included (REFERENCE.md Appendix A).
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
fn escaped_byte_len(byte: u8) -> usize {
    match byte {
        b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => 2,
        0x00..=0x1F => 6,
        _ => 1,
    }
}

fn write_string(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut run_start = 0;
    for (index, byte) in text.bytes().enumerate() {
        let escape: &str = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x09 => "\\t",
            0x0A => "\\n",
            0x0C => "\\f",
            0x0D => "\\r",
            0x00..=0x1F => "",
            _ => continue,
        };
        out.push_str(&text[run_start..index]);
        run_start = index + 1;
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xF)]));
        } else {
            out.push_str(escape);
        }
    }
    out.push_str(&text[run_start..]);
    out.push('"');
}

fn spell_number<'b>(buffer: &'b mut ryu_js::Buffer, number: &Number) -> &'b str {
    // Integers are spelled as the double they denote, as JavaScript would print them: 2^60 is
    // `1152921504606847000`, not `1152921504606846976`.
    let double = if let Some(unsigned) = number.as_u64() {
        unsigned as f64
    } else if let Some(signed) = number.as_i64() {
        signed as f64
    } else {
        number.as_f64().unwrap_or(f64::NAN)
    };
    buffer.format(double)
}

fn check_number(number: &Number) -> Result<(), LossyJson> {
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

//! Writing JSON text: JavaScript's spelling ([`encode`]), exact integers for peers that have them
//! ([`NumberSpelling::ExactIntegers`]), and `Display`/`Debug` for [`JsonValue`]. One explicit
//! stack, never recursion.

use std::fmt;

use serde_json::Number;

use crate::JsonValue;

/// Encodes `value` as compact JSON, exactly as JavaScript's `JSON.stringify` spells it.
///
/// Numbers use ECMAScript `Number::toString` spelling; strings escape `"`, `\` and the C0 controls
/// (`\b \t \n \f \r`, others as lower-case `\u00XX`) and keep everything else raw, including U+2028
/// and U+2029. The value is assumed lossless (see [`validate`](crate::validate)); an inexact integer is spelled as the
/// double nearest to it.
pub fn encode(value: &JsonValue) -> String {
    let mut out = String::new();
    encode_into(value, &mut out);
    out
}

/// [`encode`] appending to `out`.
pub fn encode_into(value: &JsonValue, out: &mut String) {
    encode_with(value, NumberSpelling::EcmaScript, out);
}

/// How [`encode_with`] spells numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NumberSpelling {
    /// ECMAScript `Number::toString`, as `JSON.stringify` writes it: 2^60 is `1152921504606847000`.
    /// What the output ledger meters and what results are written in.
    EcmaScript,
    /// Integers (values held as `i64`/`u64`) with their exact digits, other numbers as
    /// [`EcmaScript`](NumberSpelling::EcmaScript). For peers with arbitrary-precision integers,
    /// such as Python: 2^60 arrives as `1152921504606846976`, the integer the program expects.
    ExactIntegers,
}

/// [`encode_into`] with a choice of number spelling.
pub fn encode_with(value: &JsonValue, spelling: NumberSpelling, out: &mut String) {
    // Work items in reverse order of output: popping yields them left to right.
    enum Step<'a> {
        Value(&'a JsonValue),
        Key(&'a str),
        Punct(char),
    }
    let mut stack = vec![Step::Value(value)];
    let mut ryu = ryu_js::Buffer::new();
    let mut digits = [0u8; 20];
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
                match (spelling, number.as_u64(), number.as_i64()) {
                    (NumberSpelling::ExactIntegers, Some(unsigned), _) => {
                        out.push_str(itoa_u64(unsigned, &mut digits))
                    }
                    (NumberSpelling::ExactIntegers, None, Some(signed)) => {
                        if signed < 0 {
                            out.push('-');
                        }
                        out.push_str(itoa_u64(signed.unsigned_abs(), &mut digits));
                    }
                    _ => out.push_str(spell_number(&mut ryu, number)),
                }
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

/// Writes the JSON text with exact integers (as `serde_json` spells them); `{:#}` is the same.
impl fmt::Display for JsonValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        encode_with(self, NumberSpelling::ExactIntegers, &mut text);
        f.write_str(&text)
    }
}

/// The JSON text, as [`Display`](fmt::Display) writes it.
impl fmt::Debug for JsonValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

pub(crate) fn write_string(text: &str, out: &mut String) {
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

/// The decimal digits of `value`, written into `buffer`.
fn itoa_u64(mut value: u64, buffer: &mut [u8; 20]) -> &str {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buffer[start..]).unwrap_or("0")
}

pub(crate) fn spell_number<'b>(buffer: &'b mut ryu_js::Buffer, number: &Number) -> &'b str {
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

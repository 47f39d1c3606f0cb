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

/// Why [`parse`] refused a JSON text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Not JSON: the byte offset where the grammar broke.
    #[error("invalid JSON at byte {offset}")]
    Syntax {
        /// Byte offset into the text.
        offset: usize,
    },
    /// Valid JSON holding a value that is not lossless.
    #[error("JSON is not lossless: {0}")]
    Lossy(#[from] LossyJson),
    /// A key given twice in one object ([`parse_strict`] only).
    #[error("key {} appears twice in one object (byte {offset})", quote(.key))]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// Byte offset of the second occurrence's value.
        offset: usize,
    },
}

/// Parses one JSON text into a lossless value, without recursion.
///
/// This is how providers read values from a hostile peer: the walk keeps an explicit stack, so a
/// 100 000-deep text parses in constant call-stack space, and everything that is not lossless is
/// refused while parsing, not after:
///
/// - a number token that is not exactly a double (`9007199254740993`, a 400-digit integer, `1e400`)
///   or is negative zero (`-0`, `-0.0`) is [`ParseError::Lossy`], found on the token itself because
///   converting first would round it silently;
/// - a `\u` escape that leaves a lone surrogate is [`ParseError::Lossy`].
///
/// Numbers come back canonical ([`number_from_f64`]): `1.0` parses as the integer `1`. A repeated
/// object key keeps its first position and its last value, as `JSON.parse` does.
///
/// # Errors
///
/// [`ParseError::Syntax`] for anything that is not exactly one JSON value (surrounding whitespace
/// allowed), [`ParseError::Lossy`] as above.
pub fn parse(text: &str) -> Result<JsonValue, ParseError> {
    Parser { bytes: text.as_bytes(), text, pos: 0, strict: false }.parse()
}

/// [`parse`], refusing an object that gives a key twice ([`ParseError::DuplicateKey`]): for
/// documents a person writes (configuration, bindings files), where a repeated key is a mistake
/// that `JSON.parse`'s "last one wins" would hide.
///
/// # Errors
///
/// As [`parse`], and [`ParseError::DuplicateKey`].
pub fn parse_strict(text: &str) -> Result<JsonValue, ParseError> {
    Parser { bytes: text.as_bytes(), text, pos: 0, strict: true }.parse()
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Refuse duplicate keys.
    strict: bool,
}

/// A container whose closing bracket has not been read yet.
enum Open {
    Array(Vec<JsonValue>),
    /// The members so far and the key of the member whose value is being read.
    Object(serde_json::Map<String, JsonValue>, String),
}

impl Open {
    fn into_value(self) -> JsonValue {
        match self {
            Open::Array(items) => JsonValue::Array(items),
            Open::Object(members, _) => JsonValue::Object(members),
        }
    }
}

impl Parser<'_> {
    fn parse(mut self) -> Result<JsonValue, ParseError> {
        let mut stack: Vec<Open> = Vec::new();
        let result = self.parse_into(&mut stack);
        // A text that fails late leaves open containers whose finished members may be deep.
        for open in stack.drain(..) {
            drop_value(open.into_value());
        }
        result
    }

    fn parse_into(&mut self, stack: &mut Vec<Open>) -> Result<JsonValue, ParseError> {
        loop {
            // Read one value; an opened non-empty container continues the outer loop instead.
            self.skip_whitespace();
            let mut value = match self.peek() {
                Some(b'[') => {
                    self.pos += 1;
                    self.skip_whitespace();
                    if self.eat(b']') {
                        JsonValue::Array(Vec::new())
                    } else {
                        stack.push(Open::Array(Vec::new()));
                        continue;
                    }
                }
                Some(b'{') => {
                    self.pos += 1;
                    self.skip_whitespace();
                    if self.eat(b'}') {
                        JsonValue::Object(serde_json::Map::new())
                    } else {
                        let key = self.key()?;
                        stack.push(Open::Object(serde_json::Map::new(), key));
                        continue;
                    }
                }
                Some(b'"') => JsonValue::String(self.string()?),
                Some(b't') => self.literal("true", JsonValue::Bool(true))?,
                Some(b'f') => self.literal("false", JsonValue::Bool(false))?,
                Some(b'n') => self.literal("null", JsonValue::Null)?,
                Some(b'-' | b'0'..=b'9') => JsonValue::Number(self.number()?),
                _ => return Err(self.syntax()),
            };
            // Attach the value to its container, closing every container that ends here.
            loop {
                self.skip_whitespace();
                match stack.last_mut() {
                    None => {
                        return if self.pos == self.bytes.len() {
                            Ok(value)
                        } else {
                            Err(self.syntax())
                        };
                    }
                    Some(Open::Array(items)) => {
                        items.push(value);
                        if self.eat(b',') {
                            break;
                        }
                        if !self.eat(b']') {
                            return Err(self.syntax());
                        }
                        let Some(Open::Array(items)) = stack.pop() else {
                            unreachable!("matched above")
                        };
                        value = JsonValue::Array(items);
                    }
                    Some(Open::Object(members, key)) => {
                        let name = std::mem::take(key);
                        if self.strict && members.contains_key(&name) {
                            drop_value(value);
                            return Err(ParseError::DuplicateKey { key: name, offset: self.pos });
                        }
                        if let Some(previous) = members.insert(name, value) {
                            drop_value(previous);
                        }
                        if self.eat(b',') {
                            self.skip_whitespace();
                            *key = self.key()?;
                            break;
                        }
                        if !self.eat(b'}') {
                            return Err(self.syntax());
                        }
                        let Some(Open::Object(members, _)) = stack.pop() else {
                            unreachable!("matched above")
                        };
                        value = JsonValue::Object(members);
                    }
                }
            }
        }
    }

    /// A member key and its colon.
    fn key(&mut self) -> Result<String, ParseError> {
        if self.peek() != Some(b'"') {
            return Err(self.syntax());
        }
        let key = self.string()?;
        self.skip_whitespace();
        if !self.eat(b':') {
            return Err(self.syntax());
        }
        Ok(key)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.pos += 1; // The opening quote.
        let mut out = String::new();
        let mut run_start = self.pos;
        loop {
            let Some(byte) = self.peek() else { return Err(self.syntax()) };
            match byte {
                b'"' => {
                    out.push_str(&self.text[run_start..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[run_start..self.pos]);
                    self.pos += 1;
                    self.escape(&mut out)?;
                    run_start = self.pos;
                }
                0x00..=0x1F => return Err(self.syntax()),
                // Multi-byte characters are copied with the run; `text` is valid UTF-8.
                _ => self.pos += 1,
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), ParseError> {
        let Some(byte) = self.peek() else { return Err(self.syntax()) };
        self.pos += 1;
        let c = match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&unit) {
                    // A high surrogate is only lossless as the first half of an escaped pair.
                    if !(self.eat(b'\\') && self.eat(b'u')) {
                        return Err(LossyJson::LoneSurrogate.into());
                    }
                    let low = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err(LossyJson::LoneSurrogate.into());
                    }
                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    unit
                };
                char::from_u32(code).ok_or(LossyJson::LoneSurrogate)?
            }
            _ => return Err(ParseError::Syntax { offset: self.pos - 1 }),
        };
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or_else(|| self.syntax())?;
        let mut unit = 0;
        for &digit in digits {
            let value = char::from(digit).to_digit(16).ok_or_else(|| self.syntax())?;
            unit = unit * 16 + value;
        }
        self.pos += 4;
        Ok(unit)
    }

    fn number(&mut self) -> Result<Number, ParseError> {
        let start = self.pos;
        self.eat(b'-');
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.syntax()),
        }
        let mut integral = true;
        if self.eat(b'.') {
            integral = false;
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.syntax());
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            integral = false;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.syntax());
            }
            self.digits();
        }
        let token = &self.text[start..self.pos];
        if integral {
            if let Ok(unsigned) = token.parse::<u64>() {
                let number = Number::from(unsigned);
                check_number(&number)?;
                return Ok(number);
            }
            if let Ok(signed) = token.parse::<i64>() {
                if signed == 0 {
                    return Err(LossyJson::NegativeZero.into()); // `-0`
                }
                let number = Number::from(signed);
                check_number(&number)?;
                return Ok(number);
            }
        }
        // Rust's float parsing is correctly rounded; the token must denote that double exactly when
        // it is written as an integer (beyond 2^64 here, so `{:.0}` is exact and short).
        let double: f64 = token.parse().map_err(|_| self.syntax())?;
        if integral && double.is_finite() && format!("{double:.0}") != token {
            return Err(LossyJson::InexactInteger(token.to_owned()).into());
        }
        Ok(number_from_f64(double)?)
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str, value: JsonValue) -> Result<JsonValue, ParseError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.syntax())
        }
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let matched = self.peek() == Some(byte);
        self.pos += usize::from(matched);
        matched
    }

    fn syntax(&self) -> ParseError {
        ParseError::Syntax { offset: self.pos }
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

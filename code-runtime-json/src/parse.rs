//! Reading JSON text into a [`JsonValue`]: one explicit stack, lossless numbers checked on the
//! token, and an optional ceiling on what the value will hold in memory.

use indexmap::IndexMap;
use serde_json::Number;

use crate::value::{JsonArray, JsonMap};
use crate::{
    JsonValue, LossyJson, MEMBER_BYTES, OBJECT_BYTES, VALUE_BYTES, check_number, number_from_f64,
    quote,
};

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
    /// The value would hold more host memory than the ceiling given to [`parse_within`], as
    /// [`held_bytes`](crate::held_bytes) counts it.
    #[error("the value would hold more than {limit} bytes")]
    TooLarge {
        /// The ceiling.
        limit: usize,
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
    Parser::new(text, false, usize::MAX).parse()
}

/// [`parse`], refusing as soon as the value would hold more than `limit` bytes of host memory
/// ([`ParseError::TooLarge`]), counted as [`held_bytes`](crate::held_bytes) counts a
/// finished value. Each piece is counted before it is made, so a refused text never costs more
/// than `limit` plus one string of the text: this is how a host reads a value a run sends it
/// under the run's memory budget (two bytes of text, `0,`, make a 32-byte value).
///
/// # Errors
///
/// As [`parse`], and [`ParseError::TooLarge`].
pub fn parse_within(text: &str, limit: usize) -> Result<JsonValue, ParseError> {
    Parser::new(text, false, limit).parse()
}

/// [`parse`], refusing an object that gives a key twice ([`ParseError::DuplicateKey`]): for
/// documents a person writes (configuration, bindings files), where a repeated key is a mistake
/// that `JSON.parse`'s "last one wins" would hide.
///
/// # Errors
///
/// As [`parse`], and [`ParseError::DuplicateKey`].
pub fn parse_strict(text: &str) -> Result<JsonValue, ParseError> {
    Parser::new(text, true, usize::MAX).parse()
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Refuse duplicate keys.
    strict: bool,
    /// The ceiling on what the value may hold, and what it holds so far.
    limit: usize,
    held: usize,
}

/// A container whose closing bracket has not been read yet. What it holds drops without
/// recursion when a text fails late: the members are [`JsonValue`]s.
enum Open {
    Array(Vec<JsonValue>),
    /// The members so far and the key of the member whose value is being read.
    Object(IndexMap<String, JsonValue>, String),
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, strict: bool, limit: usize) -> Self {
        Parser { text, bytes: text.as_bytes(), pos: 0, strict, limit, held: 0 }
    }

    /// Counts `bytes` more of the value, before they are allocated.
    fn charge(&mut self, bytes: usize) -> Result<(), ParseError> {
        self.held = self.held.saturating_add(bytes);
        if self.held > self.limit {
            return Err(ParseError::TooLarge { limit: self.limit });
        }
        Ok(())
    }

    fn parse(mut self) -> Result<JsonValue, ParseError> {
        let mut stack: Vec<Open> = Vec::new();
        self.parse_into(&mut stack)
    }

    fn parse_into(&mut self, stack: &mut Vec<Open>) -> Result<JsonValue, ParseError> {
        loop {
            // Read one value; an opened non-empty container continues the outer loop instead.
            self.skip_whitespace();
            self.charge(VALUE_BYTES)?;
            let value = match self.peek() {
                Some(b'[') => {
                    self.pos += 1;
                    self.skip_whitespace();
                    if self.eat(b']') {
                        JsonValue::Array(JsonArray::new())
                    } else {
                        stack.push(Open::Array(Vec::new()));
                        continue;
                    }
                }
                Some(b'{') => {
                    self.pos += 1;
                    self.charge(OBJECT_BYTES)?;
                    self.skip_whitespace();
                    if self.eat(b'}') {
                        JsonValue::Object(JsonMap::new())
                    } else {
                        let key = self.key()?;
                        stack.push(Open::Object(IndexMap::new(), key));
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
            if let Some(done) = self.attach(stack, value)? {
                return Ok(done);
            }
        }
    }

    /// Attaches `value` to the innermost open container, closing every container that ends here.
    /// `Some` with the whole document once nothing is open; `None` when the container continues
    /// (after a comma) and its next value is to be read.
    fn attach(
        &mut self,
        stack: &mut Vec<Open>,
        mut value: JsonValue,
    ) -> Result<Option<JsonValue>, ParseError> {
        loop {
            self.skip_whitespace();
            match stack.last_mut() {
                None => {
                    return if self.pos == self.bytes.len() {
                        Ok(Some(value))
                    } else {
                        Err(self.syntax())
                    };
                }
                Some(Open::Array(items)) => {
                    items.push(value);
                    if self.eat(b',') {
                        return Ok(None);
                    }
                    if !self.eat(b']') {
                        return Err(self.syntax());
                    }
                    let Some(Open::Array(items)) = stack.pop() else {
                        unreachable!("matched above")
                    };
                    value = JsonValue::Array(items.into());
                }
                Some(Open::Object(members, key)) => {
                    let name = std::mem::take(key);
                    if self.strict && members.contains_key(&name) {
                        return Err(ParseError::DuplicateKey { key: name, offset: self.pos });
                    }
                    members.insert(name, value);
                    if self.eat(b',') {
                        self.skip_whitespace();
                        *key = self.key()?;
                        return Ok(None);
                    }
                    if !self.eat(b'}') {
                        return Err(self.syntax());
                    }
                    let Some(Open::Object(members, _)) = stack.pop() else {
                        unreachable!("matched above")
                    };
                    value = JsonValue::Object(JsonMap::from(members));
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
        self.charge(MEMBER_BYTES)?;
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
                    // The text holds at least as many bytes as the string it spells, so what
                    // the string took before this is bounded by the text already in memory.
                    self.charge(out.len())?;
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

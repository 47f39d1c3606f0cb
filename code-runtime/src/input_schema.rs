//! Input schemas: a binding's argument JSON Schema compiled once, and the check of one call's
//! argument against it ([`BindingFunction::validate_input`](crate::BindingFunction::validate_input)).
//!
//! The schema is the host's (or an upstream MCP server's); the argument is the program's and
//! hostile. Three things keep a check bounded whatever the program passes:
//!
//! - the validator walks the argument recursively (through a recursive `$ref` as deep as the
//!   argument goes), so an argument nested more than [`MAX_CHECKED_DEPTH`] levels is refused
//!   before the walk;
//! - `pattern` regular expressions that need backtracking give up after a fixed number of steps,
//!   and a check whose outcome hangs on a match that gave up is [`Mismatch::Undecided`], never a
//!   match or a mismatch (an approval rule asks about it; an input check refuses it);
//! - the message quotes the failing value, cut at [`DETAIL_BYTES`], so a 64 MiB string is never
//!   copied into it.
//!
//! Compiling refuses what would make the host reach outside: a `$ref` to a URL or a file is an
//! invalid schema, never a download or a read.

use std::fmt::{self, Write as _};

use crate::json::{self, JsonValue};

/// The deepest argument a schema check walks. Deeper ones are refused before the check: the
/// validator recurses once or more per level, on whatever thread runs the host loop.
pub(crate) const MAX_CHECKED_DEPTH: usize = 128;

/// The deepest schema that compiles; compiling recurses once or more per level too.
const MAX_SCHEMA_DEPTH: usize = 128;

/// How many bytes of the validator's explanation a rejection quotes.
const DETAIL_BYTES: usize = 300;

/// Steps a backtracking `pattern` (one with look-around or back-references) may take on one
/// string before the check gives up and refuses the argument; the `regex` crate's linear-time
/// engine serves every other pattern. One million steps take milliseconds.
const BACKTRACK_LIMIT: usize = 1_000_000;

/// A compiled argument schema.
pub(crate) struct InputSchema {
    validator: jsonschema::Validator,
}

impl InputSchema {
    /// Compiles `schema` (any draft the schema names with `$schema`; 2020-12 when it names none).
    ///
    /// # Errors
    ///
    /// Why the schema is not usable: not a valid JSON Schema, nested too deeply, or a `$ref` that
    /// is not inside it.
    pub(crate) fn compile(schema: &JsonValue) -> Result<Self, String> {
        if json::nests_deeper_than(schema, MAX_SCHEMA_DEPTH) {
            return Err(format!("it nests more than {MAX_SCHEMA_DEPTH} levels deep"));
        }
        let schema = schema.to_serde_json().map_err(|error| error.to_string())?;
        let validator = jsonschema::options()
            .offline()
            .with_pattern_options(
                jsonschema::PatternOptions::fancy_regex().backtrack_limit(BACKTRACK_LIMIT),
            )
            .build(&schema)
            .map_err(|error| bounded(&error))?;
        Ok(Self { validator })
    }

    /// Checks one call's argument: `Err` says how it fails (the caller words the rejection the
    /// program sees).
    pub(crate) fn check(&self, args: &JsonValue) -> Result<(), Mismatch> {
        if json::nests_deeper_than(args, MAX_CHECKED_DEPTH) {
            return Err(Mismatch::TooDeep { limit: MAX_CHECKED_DEPTH });
        }
        // Within `MAX_CHECKED_DEPTH`, which is at most `SERDE_DEPTH`: the copy is made.
        let Ok(args) = args.to_serde_json() else {
            return Err(Mismatch::TooDeep { limit: MAX_CHECKED_DEPTH });
        };
        let Err(error) = self.validator.validate(&args) else { return Ok(()) };
        let path = error.instance_path().to_string();
        let schema_path = error.schema_path().to_string();
        let detail = bounded(&error);
        // The validator reports a match it could not finish only when the outcome hangs on it
        // (it tries both outcomes first); such an error says nothing about the argument.
        match error.kind() {
            jsonschema::error::ValidationErrorKind::BacktrackLimitExceeded { .. }
            | jsonschema::error::ValidationErrorKind::RegexEngineFailure { .. } => {
                Err(Mismatch::Undecided { path, schema_path, detail })
            }
            _ => Err(Mismatch::Value { path, schema_path, detail }),
        }
    }
}

/// How an argument fails its schema.
#[derive(Debug)]
pub(crate) enum Mismatch {
    /// It nests deeper than the check walks: refused unchecked.
    TooDeep { limit: usize },
    /// The check could not decide: a `pattern` the outcome hangs on gave up on a string at
    /// `path`. Neither a match nor a mismatch.
    Undecided { path: String, schema_path: String, detail: String },
    /// A value of it does not match, whatever the matches that gave up would have said: where (a JSON Pointer), which rule of the schema, and the
    /// validator's words, cut short.
    Value { path: String, schema_path: String, detail: String },
}

impl fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InputSchema(..)")
    }
}

/// `shown`'s `Display`, cut after [`DETAIL_BYTES`] (with `…`) without formatting the rest.
fn bounded(shown: &dyn fmt::Display) -> String {
    /// Takes up to `room` bytes, then fails the formatting, which stops it.
    struct Capped {
        text: String,
        room: usize,
        cut: bool,
    }
    impl fmt::Write for Capped {
        fn write_str(&mut self, piece: &str) -> fmt::Result {
            if piece.len() <= self.room {
                self.text.push_str(piece);
                self.room -= piece.len();
                return Ok(());
            }
            let mut end = self.room;
            while !piece.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&piece[..end]);
            self.cut = true;
            Err(fmt::Error)
        }
    }
    let mut capped = Capped { text: String::new(), room: DETAIL_BYTES, cut: false };
    // An error here is the cap, or a `Display` that failed; either way the text so far stands.
    let _ = write!(capped, "{shown}");
    if capped.cut {
        capped.text.push('…');
    }
    capped.text
}

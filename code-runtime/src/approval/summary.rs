//! [`summarize`]: the one line a person reads before allowing a call (the terminal's question,
//! an MCP client's elicitation). The program writes the argument and may want the line to lie,
//! so the line shows every key of every object at every depth, cuts only what is too long to
//! read (a long string or key keeps its start and says how much more there is, a long array
//! its first items and how many more), and escapes every character that could hide text or
//! move the cursor of a terminal. Nothing here recurses: one explicit stack, as `encode`.

use std::fmt::Write as _;

use crate::json::{self, JsonValue};

/// How many bytes of a string (value or key) the line shows; the rest is counted.
const STRING_BYTES: usize = 256;

/// How many items of an array the line shows; the rest are counted.
const ARRAY_ITEMS: usize = 32;

/// `namespace.function(args)`: `args` in JSON spelling, cut per field as the module says.
pub(crate) fn summarize(namespace: &str, function: &str, args: &JsonValue) -> String {
    let mut out = String::new();
    write_text(namespace, usize::MAX, &mut out);
    out.push('.');
    write_text(function, usize::MAX, &mut out);
    out.push('(');
    write_value(args, &mut out);
    out.push(')');
    out
}

/// Writes `value` as the module says.
fn write_value(value: &JsonValue, out: &mut String) {
    // Work items in reverse order of output, as `encode` keeps them.
    enum Step<'a> {
        Value(&'a JsonValue),
        Key(&'a str),
        Text(&'a str),
        More(usize),
    }
    let mut stack = vec![Step::Value(value)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(text) => out.push_str(text),
            Step::More(items) => {
                let _ = write!(out, ",…({items} more items)");
            }
            Step::Key(key) => {
                write_quoted(key, out);
                out.push(':');
            }
            Step::Value(JsonValue::String(text)) => write_quoted(text, out),
            Step::Value(JsonValue::Array(items)) => {
                out.push('[');
                stack.push(Step::Text("]"));
                if items.len() > ARRAY_ITEMS {
                    stack.push(Step::More(items.len() - ARRAY_ITEMS));
                }
                for (index, item) in items.iter().take(ARRAY_ITEMS).enumerate().rev() {
                    stack.push(Step::Value(item));
                    if index > 0 {
                        stack.push(Step::Text(","));
                    }
                }
            }
            Step::Value(JsonValue::Object(map)) => {
                out.push('{');
                stack.push(Step::Text("}"));
                for (index, (key, item)) in map.iter().enumerate().rev() {
                    stack.push(Step::Value(item));
                    stack.push(Step::Key(key));
                    if index > 0 {
                        stack.push(Step::Text(","));
                    }
                }
            }
            // Numbers, booleans and null are short and plain: their JSON spelling.
            Step::Value(flat) => json::encode_into(flat, out),
        }
    }
}

/// `text` in double quotes, escaped, cut after [`STRING_BYTES`]; a cut string is followed
/// (outside its quotes, where the program cannot write) by how many bytes it had.
fn write_quoted(text: &str, out: &mut String) {
    out.push('"');
    let shown = write_text(text, STRING_BYTES, out);
    out.push('"');
    if shown < text.len() {
        let _ = write!(out, "…({} bytes in all)", text.len());
    }
}

/// Writes `text` escaped, up to `bytes` of it (at a character boundary); returns how many
/// bytes of it were written.
fn write_text(text: &str, bytes: usize, out: &mut String) -> usize {
    let mut shown = 0;
    for (at, c) in text.char_indices() {
        if at + c.len_utf8() > bytes {
            return at;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if hides(c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
        shown = at + c.len_utf8();
    }
    shown
}

/// Whether `c` could hide text from the person reading the line or act on their terminal:
/// C0 and C1 controls and DEL (escape sequences, carriage returns, backspaces), line and
/// paragraph separators, the bidirectional overrides, embeddings and isolates (which reorder
/// what follows), and the invisible format characters (zero widths, joiners, the byte order
/// mark, soft hyphen, tags).
fn hides(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{ad}'
        | '\u{61c}'
        | '\u{180e}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{e0000}'..='\u{e007f}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn a_short_call_reads_as_json() {
        let args = json!({ "name": "infra", "force": true, "n": [1, 2.5, null] });
        assert_eq!(
            summarize("github", "delete_repo", &args),
            r#"github.delete_repo({"name":"infra","force":true,"n":[1,2.5,null]})"#
        );
    }

    #[test]
    fn a_long_first_field_hides_no_later_key() {
        let args = json!({ "note": "x".repeat(10_000), "path": "/", "nested": { "rm": true } });
        let line = summarize("fs", "write", &args);
        let expected = format!(
            r#"fs.write({{"note":"{}"…(10000 bytes in all),"path":"/","nested":{{"rm":true}}}})"#,
            "x".repeat(STRING_BYTES)
        );
        assert_eq!(line, expected);
        let mut keys = crate::json::JsonMap::new();
        for key in 0..1000 {
            keys.insert(format!("k{key}"), json!(key));
        }
        let line = summarize("fs", "write", &JsonValue::Object(keys));
        assert!((0..1000).all(|key| line.contains(&format!("\"k{key}\":{key}"))));
    }

    #[test]
    fn long_keys_and_arrays_say_how_much_is_cut() {
        let key = "é".repeat(200);
        let args = json!({ key.clone(): (0..40).collect::<Vec<_>>() });
        let line = summarize("a", "b", &args);
        let items = (0..32).map(|n| n.to_string()).collect::<Vec<_>>().join(",");
        assert_eq!(
            line,
            format!(
                r#"a.b({{"{}"…(400 bytes in all):[{items},…(8 more items)]}})"#,
                "é".repeat(128)
            )
        );
    }

    #[test]
    fn nothing_reaches_the_terminal_raw_that_could_hide_or_move_text() {
        let hostile = "a\u{1b}[2K\r\u{8}\u{7f}\u{85}\u{9b}\u{202e}\u{2066}\u{200b}\u{2028}\u{2029}\u{feff}\u{e0041}\"\\z";
        let line = summarize("t", "f", &json!({ hostile: hostile }));
        let escaped = r#"a\u001b[2K\r\u0008\u007f\u0085\u009b\u202e\u2066\u200b\u2028\u2029\ufeff\udb40\udc41\"\\z"#;
        assert_eq!(line, format!(r#"t.f({{"{escaped}":"{escaped}"}})"#));
        assert!(line.chars().all(|c| !hides(c)));
    }

    #[test]
    fn a_deep_argument_is_written_without_recursion() {
        let mut deep = json!(1);
        for _ in 0..100_000 {
            let mut map = crate::json::JsonMap::new();
            map.insert("k", JsonValue::Array(vec![deep].into()));
            deep = JsonValue::Object(map);
        }
        let line = summarize("t", "f", &deep);
        assert_eq!(line.len(), "t.f()".len() + 1 + 100_000 * r#"{"k":[]}"#.len());
        assert!(line.ends_with("]})"));
    }
}

//! How deep a program's syntax nests, bounded from its text before any parser sees it.
//!
//! swc's parser, its visitors and the code that drops its tree recurse once or more per level
//! of syntax nesting, on the strip's stack: a program of half a million parentheses made the
//! host commit 1.7 GB of stack (and as much again for each copy a server strips at once). A
//! parser that counts its depth would be the exact bound; swc has none, so [`too_deep`] reads
//! the tokens once, with no recursion, and bounds the depth from above:
//!
//! - each bracket (`(`, `[`, `{`, a template's `${`) opens a level, and what it encloses counts
//!   as one more step of the level around it once it closes (`f()()()` nests three calls);
//! - within a level, every operator and every keyword that can take an operand (`!`, `.`, `+`,
//!   `=>`, `?`, `new`, `await`, `if`, `else` ...) may nest the rest one deeper: a run of them
//!   counts one each;
//! - a `,` or `;` starts the level's count again (arguments, elements, members, statements are
//!   lists, not nesting), and so does the end of a line where a statement ends (a line that ends
//!   with a name, a literal or a closing bracket, in a block, followed by a line that does not
//!   continue it), so code without semicolons is counted per statement;
//! - strings, comments, regular expressions and template text count nothing.
//!
//! A real nesting is never deeper than the count; code written by people and models stays far
//! below the bound, and the count over-reads only statements of a thousand operators.

/// The deepest a program may nest, as counted here. V8 refuses far deeper programs than this
/// anyway, and some of swc's transforms copy a subtree per level.
pub(crate) const MAX_NESTING: usize = 1_000;

/// Keywords that take an operand or a body, and so may nest what follows them.
const NESTING_KEYWORDS: &[&str] = &[
    "new",
    "typeof",
    "void",
    "delete",
    "await",
    "yield",
    "if",
    "else",
    "for",
    "while",
    "do",
    "with",
    "switch",
    "return",
    "throw",
    "case",
    "in",
    "of",
    "instanceof",
    "extends",
    "as",
    "satisfies",
    "keyof",
    "class",
    "function",
    "catch",
];

/// Keywords whose parenthesized head is followed by a body, which may be on the next line.
const HEAD_KEYWORDS: &[&str] = &["if", "for", "while", "with", "switch", "catch"];

/// Operators of more than one character, longest first (each is one step, as one token).
const OPERATORS: &[&str] = &[
    ">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=", "=>", "==", "!=",
    "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
    "**", "<<", ">>",
];

/// What the last token was, for where a line ends a statement and where `/` starts a regex.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    /// Nothing yet, an operator, a nesting keyword or an opening bracket: an operand follows.
    Operand,
    /// A name, a literal or a closing bracket: an expression may end here.
    End,
    /// The closing parenthesis of an `if (..)`-like head: its body follows.
    Head,
}

/// One open level.
struct Level {
    /// `(`, `[`, `{`, or `$` for a template's `${`.
    bracket: u8,
    /// Steps counted in it since its count last started again.
    steps: usize,
    /// Whether it is the head of an `if`, `for`, `while`, `with`, `switch` or `catch`.
    head: bool,
}

/// The count as the tokens go by.
struct Count {
    /// The open levels; the outermost is a block: the program's statements.
    levels: Vec<Level>,
    /// One per level beyond the outermost, plus every level's steps.
    depth: usize,
    last: Last,
    /// Whether the last token was `if`, `for` ... (its parenthesis is a head).
    after_head_keyword: bool,
}

impl Count {
    fn level(&mut self) -> &mut Level {
        self.levels.last_mut().expect("the outermost level is never closed")
    }

    fn open(&mut self, bracket: u8) {
        let head = bracket == b'(' && self.after_head_keyword;
        self.levels.push(Level { bracket, steps: 0, head });
        self.depth += 1;
        self.last = Last::Operand;
    }

    /// Closes the innermost level; `None` at the outermost (an unbalanced closer, which the
    /// parser will refuse).
    fn close(&mut self) -> Option<Level> {
        if self.levels.len() == 1 {
            return None;
        }
        let closed = self.levels.pop()?;
        self.depth -= 1 + closed.steps;
        Some(closed)
    }

    fn step(&mut self) {
        self.level().steps += 1;
        self.depth += 1;
    }

    /// The innermost level counts afresh (a new item or statement).
    fn restart(&mut self) {
        let steps = std::mem::take(&mut self.level().steps);
        self.depth -= steps;
    }

    /// The token at `at` (not a space nor a comment) of `source`, counted; where it ends.
    fn token(&mut self, source: &str, at: usize) -> usize {
        let bytes = source.as_bytes();
        let byte = bytes[at];
        let after_head_keyword = std::mem::take(&mut self.after_head_keyword);
        match byte {
            b'"' | b'\'' => self.operand(string_end(bytes, at)),
            b'`' => self.template(bytes, at + 1),
            b'(' | b'[' | b'{' => {
                self.after_head_keyword = after_head_keyword;
                self.open(byte);
                self.after_head_keyword = false;
                at + 1
            }
            b')' | b']' | b'}' => match self.close() {
                // A template's substitutions are a list, as arguments are.
                Some(closed) if closed.bracket == b'$' && byte == b'}' => {
                    self.template(bytes, at + 1)
                }
                Some(closed) => {
                    self.step();
                    self.last = if closed.head { Last::Head } else { Last::End };
                    at + 1
                }
                None => self.operand(at + 1),
            },
            b',' | b';' => {
                self.restart();
                self.last = Last::Operand;
                at + 1
            }
            b'/' if self.last != Last::End => self.operand(regex_end(bytes, at)),
            b'0'..=b'9' => self.operand(number_end(bytes, at)),
            _ if is_word_start(source, at) => {
                let end = word_end(bytes, at);
                let word = &source[at..end];
                if !NESTING_KEYWORDS.contains(&word) {
                    return self.operand(end);
                }
                self.after_head_keyword = HEAD_KEYWORDS.contains(&word);
                self.step();
                self.last = Last::Operand;
                end
            }
            _ => {
                let operator = OPERATORS.iter().find(|op| source[at..].starts_with(**op));
                let len = operator.map_or_else(|| char_len(source, at), |op| op.len());
                let postfix =
                    matches!(&source[at..at + len], "++" | "--") && self.last == Last::End;
                self.step();
                self.last = if postfix { Last::End } else { Last::Operand };
                at + len
            }
        }
    }

    /// A name or a literal ending at `end`.
    fn operand(&mut self, end: usize) -> usize {
        self.last = Last::End;
        end
    }

    /// A template's text from `at` (after its backquote or a `${..}`): up to its end, or into
    /// a `${`, which opens a level.
    fn template(&mut self, bytes: &[u8], at: usize) -> usize {
        match template_part(bytes, at) {
            (end, true) => {
                self.open(b'$');
                end
            }
            (end, false) => self.operand(end),
        }
    }
}

/// `Some(byte offset)` where the count first goes past `limit`; `None` when it never does.
pub(crate) fn too_deep(source: &str, limit: usize) -> Option<usize> {
    let bytes = source.as_bytes();
    let outermost = Level { bracket: b'{', steps: 0, head: false };
    let mut count =
        Count { levels: vec![outermost], depth: 0, last: Last::Operand, after_head_keyword: false };
    let mut at = 0;
    let mut newline = false;
    while at < bytes.len() {
        let (next, saw_newline) = trivia_end(source, at);
        newline |= saw_newline;
        if next >= bytes.len() {
            break;
        }
        at = next;
        // A statement ended at the line break: the level counts afresh.
        if newline
            && count.last == Last::End
            && count.level().bracket == b'{'
            && !starts_continuation(&source[at..])
        {
            count.restart();
        }
        newline = false;
        let end = count.token(source, at);
        if count.depth > limit {
            return Some(at);
        }
        at = end.max(at + 1);
    }
    None
}

/// Where the spaces and comments from `at` end, and whether they held a line break.
fn trivia_end(source: &str, mut at: usize) -> (usize, bool) {
    let bytes = source.as_bytes();
    let mut newline = false;
    while at < bytes.len() {
        match bytes[at] {
            b'\n' | b'\r' => {
                newline = true;
                at += 1;
            }
            b' ' | b'\t' | 0x0b | 0x0c => at += 1,
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = bytes[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |end| at + end);
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                let end = source[at + 2..].find("*/").map_or(bytes.len(), |end| at + 2 + end + 2);
                newline |= source[at..end].contains('\n');
                at = end;
            }
            _ => break,
        }
    }
    (at, newline)
}

/// Whether a line starting with `rest` continues the statement of the line before (JavaScript
/// inserts no semicolon before these).
fn starts_continuation(rest: &str) -> bool {
    let Some(first) = rest.bytes().next() else { return false };
    if matches!(first, b'(' | b'[' | b'`' | b'.' | b'?' | b':' | b',' | b'=' | b'<' | b'>')
        || matches!(first, b'*' | b'%' | b'&' | b'|' | b'^' | b'/')
    {
        return true;
    }
    // A binary `+` or `-` continues; `++`/`--` starts a new statement.
    if matches!(first, b'+' | b'-') {
        return !rest.starts_with("++") && !rest.starts_with("--");
    }
    let word: String =
        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$').collect();
    matches!(
        word.as_str(),
        "else" | "in" | "of" | "instanceof" | "as" | "satisfies" | "extends" | "catch" | "finally"
    )
}

fn is_word_start(source: &str, at: usize) -> bool {
    source[at..]
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$' || c == '#' || c == '\\')
}

fn word_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() {
        let byte = bytes[at];
        // Names, numbers (with `.` and exponents' signs read as further steps, which only
        // over-counts) and non-ASCII letters.
        if byte.is_ascii_alphanumeric()
            || matches!(byte, b'_' | b'$' | b'#' | b'\\')
            || byte >= 0x80
        {
            at += 1;
        } else {
            break;
        }
    }
    at
}

/// The end of the number literal at `at`: digits, letters (`0x`, `n`, `e`), `_`, a decimal
/// point, and an exponent's sign.
fn number_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() {
        let byte = bytes[at];
        let signed = matches!(byte, b'+' | b'-') && matches!(bytes[at - 1], b'e' | b'E');
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.') || signed {
            at += 1;
        } else {
            break;
        }
    }
    at
}

fn char_len(source: &str, at: usize) -> usize {
    source[at..].chars().next().map_or(1, char::len_utf8)
}

/// The end of the string literal starting at `at` (its quote), or of the line where it is
/// not closed.
fn string_end(bytes: &[u8], at: usize) -> usize {
    let quote = bytes[at];
    let mut i = at + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            byte if byte == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// From `at`, inside a template's text: where the text part ends, and whether it ended at a
/// `${` (else at the closing backquote, or the end of the program).
fn template_part(bytes: &[u8], mut at: usize) -> (usize, bool) {
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'`' => return (at + 1, false),
            b'$' if bytes.get(at + 1) == Some(&b'{') => return (at + 2, true),
            _ => at += 1,
        }
    }
    (bytes.len(), false)
}

/// The end of the regular expression literal starting at `at` (its `/`), flags included.
fn regex_end(bytes: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    let mut class = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            b'[' => {
                class = true;
                i += 1;
            }
            b']' => {
                class = false;
                i += 1;
            }
            b'/' if !class => return word_end(bytes, i + 1),
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_past(source: &str, limit: usize) -> bool {
        too_deep(source, limit).is_some()
    }

    #[test]
    fn deep_syntax_of_every_kind_is_caught() {
        let n = 5_000;
        for deep in [
            format!("return {}1{}", "(".repeat(n), ")".repeat(n)),
            format!("return {}1{}", "[".repeat(n), "]".repeat(n)),
            format!("return {}", "{a:".repeat(n)),
            format!("return {}1", "!".repeat(n)),
            format!("return {}1", "-".repeat(n)),
            format!("return {}1", "x => ".repeat(n)),
            format!("return 1{}", " + 1".repeat(n)),
            format!("return a{}", ".b".repeat(n)),
            format!("return f{}", "()".repeat(n)),
            format!("return {}", "await ".repeat(n)),
            format!("return {}", "new ".repeat(n)),
            format!("return {}1", "a ? b : ".repeat(n)),
            format!("{}x()", "if (a)\n".repeat(n)),
            format!("if (a) x()\n{}", "else if (b) y()\n".repeat(n)),
            format!("return `{}`", "${`".repeat(n)),
            format!("let x = a\n{}", "  .b()\n".repeat(n)),
            format!("return {}1", "typeof ".repeat(n)),
            format!("type T = {}number", "Array<".repeat(n)),
        ] {
            assert!(depth_past(&deep, MAX_NESTING), "{}", &deep[..80.min(deep.len())]);
        }
    }

    #[test]
    fn programs_as_written_are_far_below_the_bound() {
        let statement = "const r = await tools.search({ query: `a ${b} c`, limit: (n + 1) * 2 })\n";
        let long = statement.repeat(5_000);
        assert!(too_deep(&long, 20).is_none());
        let with_semicolons = "let x = f(a, b); x.y = [1, 2, 3].map((v) => v * 2);\n".repeat(5_000);
        assert!(too_deep(&with_semicolons, 20).is_none());
        let blocks = "function f() {\n  if (a) {\n    return 1\n  } else {\n    return 2\n  }\n}\n";
        assert!(too_deep(&blocks.repeat(5_000), 20).is_none());
        // What looks like nesting inside strings, comments, regular expressions and template
        // text counts nothing.
        let quiet = format!(
            "const s = \"{0}\"\nconst t = '{0}'\n// {0}\n/* {0} */\nconst r = /{1}/g\nconst u = `{0}`\n",
            "((((!!!!".repeat(1_000),
            "\\(\\(\\(\\(".repeat(1_000)
        );
        assert!(too_deep(&quiet, 20).is_none(), "{:?}", too_deep(&quiet, 20));
        let chained =
            "const r = items\n  .filter((x) => x.ok)\n  .map((x) => x.id)\n  .slice(0, 10)\n";
        assert!(too_deep(&chained.repeat(1_000), 40).is_none());
    }

    #[test]
    fn the_offset_is_where_the_bound_is_passed() {
        let source = format!("return {}1", "!".repeat(20));
        // `return` is one step, each `!` one more: the tenth `!` is the eleventh.
        assert_eq!(too_deep(&source, 10), Some("return ".len() + 9));
    }
}

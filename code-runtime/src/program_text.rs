//! The program text as the model wrote it, made runnable: rules every provider applies before
//! it looks at the program (the host loop applies them, so both languages share them).
//!
//! Models often answer with the program inside a Markdown code fence (```` ```ts ```` … ```` ``` ````),
//! as they would in a chat. A program that is one fenced block and nothing else runs as the
//! block's content. The fence lines become empty lines, so every line of the program keeps its
//! number in messages and stack traces.

/// The content of `program` when it is exactly one fenced code block (surrounding whitespace
/// allowed), with the opening fence line left as an empty line; `None` otherwise (no fence,
/// text outside the block, or more than one block).
///
/// ```
/// use code_runtime::provider::unfenced;
///
/// assert_eq!(unfenced("```ts\nreturn 1;\n```\n").as_deref(), Some("\nreturn 1;\n"));
/// assert_eq!(unfenced("return 1;"), None);
/// assert_eq!(unfenced("```py\nx = 1\n```\nprint(x)"), None, "text after the block");
/// ```
pub fn unfenced(program: &str) -> Option<String> {
    let start = program.len() - program.trim_start().len();
    let rest = &program[start..];
    let marker = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let width = rest.chars().take_while(|c| *c == marker).count();
    if width < 3 {
        return None;
    }
    let fence = &rest[..width];
    let opening_end = rest.find('\n')?;
    // The info string (`ts`, `python {.numberLines}`) may not hold the marker.
    if rest[width..opening_end].contains(marker) {
        return None;
    }
    let inside = &rest[opening_end + 1..];
    let closing = inside.trim_end();
    let content = closing.strip_suffix(fence)?;
    // The closing fence is a line of its own, and nothing in between is a fence line.
    if !(content.is_empty() || content.ends_with('\n')) {
        return None;
    }
    if content.lines().any(|line| line.trim_start().starts_with(fence)) {
        return None;
    }
    Some(format!("{}\n{content}", &program[..start]))
}

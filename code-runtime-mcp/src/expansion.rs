//! `${VAR}` in the gateway's config: [`expand`], once, when the config is read (the servers'
//! `env`, headers and URLs, and the OAuth keys), against an [`Environment`].

/// Where `${VAR}` gets its value: the process environment, or a test's.
pub(crate) type Environment<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// `text` with each `${NAME}` replaced by the variable's value, and each `${NAME:-default}` by
/// its value or, when it is unset or empty, `default`. A `$` not followed by `{` stays as it
/// is. An unset variable with no default is an error naming it, as is a `${` never closed.
pub(crate) fn expand(text: &str, environment: &Environment<'_>) -> Result<String, String> {
    let mut expanded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        expanded.push_str(&rest[..at]);
        let inside = &rest[at + 2..];
        let end = inside.find('}').ok_or("a ${ is not closed by }")?;
        let (name, default) = match inside[..end].split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (&inside[..end], None),
        };
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!("${{{name}}} is not a variable name"));
        }
        if name == crate::CHECKPOINT_KEY_VARIABLE {
            return Err(format!(
                "${{{name}}} is the checkpoint key: it is never handed to an upstream server"
            ));
        }
        match (environment(name).filter(|value| !value.is_empty() || default.is_none()), default) {
            (Some(value), _) => expanded.push_str(&value),
            (None, Some(default)) => expanded.push_str(default),
            (None, None) => return Err(format!("${{{name}}} is not set")),
        }
        rest = &inside[end + 1..];
    }
    expanded.push_str(rest);
    Ok(expanded)
}

/// The tests' environment: `TOKEN` is `t0k`, `EMPTY` is empty, nothing else is set.
#[cfg(test)]
pub(crate) fn test_environment(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("t0k".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_environment as environment;

    #[test]
    fn variables_expand_with_defaults_and_dollars_stay() {
        let expand = |text: &str| expand(text, &environment);
        assert_eq!(expand("Bearer ${TOKEN}").as_deref(), Ok("Bearer t0k"));
        assert_eq!(expand("${TOKEN}${TOKEN}-${UNSET:-d}").as_deref(), Ok("t0kt0k-d"));
        // `:-` takes the default for an empty value too; without it, empty is a value.
        assert_eq!(expand("[${EMPTY:-d}][${EMPTY}]").as_deref(), Ok("[d][]"));
        assert_eq!(expand("${UNSET:-}").as_deref(), Ok(""));
        // Only `${` starts a variable: a price, `$HOME` and a lone `$` are text.
        assert_eq!(expand("$5 $HOME $").as_deref(), Ok("$5 $HOME $"));
        // What a value holds is not expanded again.
        let nested = |name: &str| (name == "A").then(|| "${B}".to_owned());
        assert_eq!(super::expand("${A}", &nested).as_deref(), Ok("${B}"));
        assert_eq!(expand("${UNSET}"), Err("${UNSET} is not set".into()));
        assert_eq!(
            expand("${CODE_RUNTIME_CHECKPOINT_KEY:-x}"),
            Err("${CODE_RUNTIME_CHECKPOINT_KEY} is the checkpoint key: it is never handed to an upstream server".into())
        );
        assert_eq!(expand("${}"), Err("${} is not a variable name".into()));
        assert_eq!(expand("${A-B}"), Err("${A-B} is not a variable name".into()));
        assert_eq!(expand("x${TOKEN"), Err("a ${ is not closed by }".into()));
    }
}

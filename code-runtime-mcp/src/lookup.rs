//! `search_tools` and `describe_tools`: the catalogue looked up for a client. What a client sends
//! sizes this work (a query's words times the catalogue's bytes, names times namespaces), so it
//! is bounded before it starts ([`MAX_QUERY_BYTES`], [`MAX_QUERY_WORDS`],
//! [`MAX_DESCRIBE_NAMES`]) and runs on a blocking thread ([`off_the_executor`]): the threads
//! that serve every client's runs and messages never wait for it.

use code_runtime::json::JsonValue;
use code_runtime::{CodeBindingNamespace, CodeRunRequest, describe_request, json};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};

/// The longest `search_tools` query, in bytes: keywords, not a document.
pub(crate) const MAX_QUERY_BYTES: usize = 1024;

/// The most distinct words of a query that are looked for.
pub(crate) const MAX_QUERY_WORDS: usize = 32;

/// The most names one `describe_tools` call takes.
pub(crate) const MAX_DESCRIBE_NAMES: usize = 256;

/// How many matches `search_tools` returns at most.
const SEARCH_RESULTS: usize = 20;

/// Every function of the catalogue as `search_tools` looks at it, made once per server.
pub(crate) struct SearchIndex {
    /// `namespace.function`, its description, and both in lower case (what words are found in).
    entries: Vec<(String, String, String)>,
}

impl SearchIndex {
    pub(crate) fn new(namespaces: &[CodeBindingNamespace]) -> Self {
        let mut entries = Vec::new();
        for namespace in namespaces {
            for (name, function) in &namespace.functions {
                let label = format!("{}.{name}", namespace.global);
                let description = function.description_text().unwrap_or_default().to_owned();
                let haystack = format!("{label} {description}").to_lowercase();
                entries.push((label, description, haystack));
            }
        }
        Self { entries }
    }

    /// The functions that hold most of `words`, best first (ties in the catalogue's order); with
    /// no words, the first ones.
    pub(crate) fn search(&self, words: &[String]) -> CallToolResult {
        let mut matches: Vec<(usize, &str, &str)> = Vec::new();
        for (label, description, haystack) in &self.entries {
            let score = words.iter().filter(|word| haystack.contains(word.as_str())).count();
            if score > 0 || words.is_empty() {
                matches.push((score, label, description));
            }
        }
        // The sort is stable: ties keep the catalogue's order.
        matches.sort_by_key(|(score, _, _)| std::cmp::Reverse(*score));
        let found: Vec<JsonValue> = matches
            .into_iter()
            .take(SEARCH_RESULTS)
            .map(|(_, name, description)| json!({ "name": name, "description": description }))
            .collect();
        let value = json!({ "tools": found });
        let mut reply = CallToolResult::success(vec![ContentBlock::text(json::encode(&value))]);
        reply.structured_content = value.to_serde_json().ok();
        reply
    }
}

/// The distinct lower-case words of `query`; a query past [`MAX_QUERY_BYTES`] or
/// [`MAX_QUERY_WORDS`] is refused.
pub(crate) fn query_words(query: &str) -> Result<Vec<String>, ErrorData> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(ErrorData::invalid_params(
            format!(
                "search_tools' query may be at most {MAX_QUERY_BYTES} bytes (a few keywords), got {}",
                query.len()
            ),
            None,
        ));
    }
    let mut words: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
        let word = word.to_lowercase();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    if words.len() > MAX_QUERY_WORDS {
        return Err(ErrorData::invalid_params(
            format!(
                "search_tools' query may hold at most {MAX_QUERY_WORDS} words, got {}",
                words.len()
            ),
            None,
        ));
    }
    Ok(words)
}

/// `describe_tools` for `names` (at most [`MAX_DESCRIBE_NAMES`]) of `namespaces` in `language`,
/// declared as `base` (the catalogue's request, its values and `callTool`) would be.
pub(crate) fn describe(
    namespaces: &[CodeBindingNamespace],
    base: CodeRunRequest,
    names: &[String],
    language: &str,
) -> Result<CallToolResult, ErrorData> {
    if names.len() > MAX_DESCRIBE_NAMES {
        return Err(ErrorData::invalid_params(
            format!(
                "describe_tools takes at most {MAX_DESCRIBE_NAMES} names at once, got {}",
                names.len()
            ),
            None,
        ));
    }
    let mut unknown = Vec::new();
    let mut chosen: Vec<CodeBindingNamespace> = Vec::new();
    for name in names {
        let found = namespaces.iter().find_map(|namespace| {
            if namespace.global == *name {
                return Some((namespace, None));
            }
            let member = name.strip_prefix(namespace.global.as_str())?.strip_prefix('.')?;
            namespace.functions.get(member).map(|function| (namespace, Some((member, function))))
        });
        let Some((namespace, member)) = found else {
            unknown.push(name.as_str());
            continue;
        };
        let index = match chosen.iter().position(|c| c.global == namespace.global) {
            Some(index) => index,
            None => {
                let mut copy = namespace.clone();
                copy.functions.clear();
                chosen.push(copy);
                chosen.len() - 1
            }
        };
        match member {
            None => chosen[index].functions = namespace.functions.clone(),
            Some((member, function)) => {
                chosen[index].functions.insert(member.to_owned(), function.clone());
            }
        }
    }
    if !unknown.is_empty() {
        let text =
            format!("no such tools: {}; search_tools finds them by keyword", unknown.join(", "));
        return Ok(CallToolResult::error(vec![ContentBlock::text(text)]));
    }
    let request = CodeRunRequest { bindings: chosen, ..base };
    match describe_request(&request, language) {
        Ok(text) => Ok(CallToolResult::success(vec![ContentBlock::text(text)])),
        Err(error) => Err(ErrorData::invalid_params(error.to_string(), None)),
    }
}

/// Runs `work` on a blocking thread of the runtime that serves the client, so that its threads
/// go on serving every other client meanwhile.
pub(crate) async fn off_the_executor<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ErrorData> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ErrorData::internal_error(format!("the lookup failed: {error}"), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_bounded_in_bytes_and_in_words() {
        assert_eq!(query_words("Search, search the WEB").unwrap(), ["search", "the", "web"]);
        let long = "x".repeat(MAX_QUERY_BYTES + 1);
        let error = query_words(&long).unwrap_err();
        assert!(error.message.contains("at most 1024 bytes"), "{}", error.message);
        let many: String = (0..=MAX_QUERY_WORDS).map(|i| format!("w{i} ")).collect();
        let error = query_words(&many).unwrap_err();
        assert!(error.message.contains("at most 32 words"), "{}", error.message);
        // Repeated words count once.
        assert_eq!(query_words(&"same ".repeat(200)).unwrap(), ["same"]);
    }
}

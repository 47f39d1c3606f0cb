//! What the upstream servers offer besides tools, passed through to the client: their
//! resources, resource templates and prompts (docs/design.md §16). A resource or prompt keeps what
//! it is, and its name becomes `<namespace>/<name>`; a resource's URI stays its own, and a read
//! goes to the one server that listed it or whose template makes it. A URI two servers claim
//! is refused, naming both: one server must not be able to answer for another's resources.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use code_runtime::json;
use rmcp::ErrorData;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ReadResourceRequestParams, ReadResourceResult,
};

use crate::upstream::Upstream;

/// The upstream servers, in the config's order, and where each resource URI was last listed.
pub(crate) struct Passthrough {
    upstreams: Vec<Arc<Upstream>>,
    /// URI to the indexes of the servers that listed it.
    listed: Mutex<HashMap<String, Vec<usize>>>,
}

impl Passthrough {
    pub(crate) fn new(upstreams: Vec<Arc<Upstream>>) -> Self {
        Self { upstreams, listed: Mutex::new(HashMap::new()) }
    }

    /// Whether any server offers resources, and whether any offers prompts.
    pub(crate) fn offers(&self) -> (bool, bool) {
        let resources = self.upstreams.iter().any(|upstream| upstream.offers().0);
        let prompts = self.upstreams.iter().any(|upstream| upstream.offers().1);
        (resources, prompts)
    }

    /// Every server's resources, named `<namespace>/<name>`. A server that cannot list them is
    /// an error naming it: a list that silently lacks a server's resources would mislead.
    pub(crate) async fn resources(&self) -> Result<ListResourcesResult, ErrorData> {
        let mut all = Vec::new();
        let mut listed = HashMap::new();
        for (index, upstream) in self.upstreams.iter().enumerate() {
            if !upstream.offers().0 {
                continue;
            }
            for mut resource in upstream.resources().await.map_err(failed)? {
                resource.name = format!("{}/{}", upstream.name(), resource.name);
                let listers: &mut Vec<usize> = listed.entry(resource.uri.clone()).or_default();
                if !listers.contains(&index) {
                    listers.push(index);
                }
                all.push(resource);
            }
        }
        *self.listed.lock().unwrap_or_else(PoisonError::into_inner) = listed;
        Ok(ListResourcesResult::with_all_items(all))
    }

    /// Every server's resource templates, named `<namespace>/<name>`.
    pub(crate) async fn templates(&self) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut all = Vec::new();
        for upstream in self.upstreams.iter().filter(|upstream| upstream.offers().0) {
            for mut template in upstream.templates().await.map_err(failed)? {
                template.name = format!("{}/{}", upstream.name(), template.name);
                all.push(template);
            }
        }
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    /// Reads `uri` from the one server that listed it or whose template makes it; when none
    /// does, from each server that offers resources, in order, until one has it. A URI several
    /// servers claim is refused.
    pub(crate) async fn read(
        &self,
        params: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, ErrorData> {
        let uri = params.uri.clone();
        let listed = |listed: &Mutex<HashMap<String, Vec<usize>>>| {
            listed.lock().unwrap_or_else(PoisonError::into_inner).get(&uri).cloned()
        };
        // A URI not in the last listing: the listing again, so a server that lists it is known
        // before any server is asked (one must not answer for another by coming first).
        if listed(&self.listed).is_none() {
            let _ = self.resources().await;
        }
        let mut claims = listed(&self.listed).unwrap_or_default();
        for (index, upstream) in self.upstreams.iter().enumerate() {
            if upstream.offers().0 && !claims.contains(&index) {
                let templates = upstream.templates().await.unwrap_or_default();
                if templates.iter().any(|template| matches(&template.uri_template, &uri)) {
                    claims.push(index);
                }
            }
        }
        if claims.len() > 1 {
            let names: Vec<String> =
                claims.iter().map(|index| json::quote(self.upstreams[*index].name())).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "resource {} is claimed by several upstream servers ({}): not read from any",
                    json::quote(&uri),
                    names.join(", ")
                ),
                None,
            ));
        }
        let order: Vec<usize> = if claims.is_empty() {
            (0..self.upstreams.len()).filter(|index| self.upstreams[*index].offers().0).collect()
        } else {
            claims
        };
        let mut refusals = Vec::new();
        for index in order {
            match self.upstreams[index].read(params.clone()).await {
                Ok(result) => return Ok(result),
                Err(why) => refusals.push(why),
            }
        }
        let why = if refusals.is_empty() {
            "no upstream server offers resources".to_owned()
        } else {
            refusals.join("; ")
        };
        Err(ErrorData::resource_not_found(
            format!("no resource {}: {why}", json::quote(&uri)),
            None,
        ))
    }

    /// Every server's prompts, named `<namespace>/<name>`.
    pub(crate) async fn prompts(&self) -> Result<ListPromptsResult, ErrorData> {
        let mut all = Vec::new();
        for upstream in self.upstreams.iter().filter(|upstream| upstream.offers().1) {
            for mut prompt in upstream.prompts().await.map_err(failed)? {
                prompt.name = format!("{}/{}", upstream.name(), prompt.name);
                all.push(prompt);
            }
        }
        Ok(ListPromptsResult::with_all_items(all))
    }

    /// The prompt `<namespace>/<name>`, from its server.
    pub(crate) async fn prompt(
        &self,
        mut params: GetPromptRequestParams,
    ) -> Result<GetPromptResult, ErrorData> {
        let quoted = json::quote(&params.name);
        let (namespace, name) = params.name.split_once('/').ok_or_else(|| {
            ErrorData::invalid_params(
                format!("no prompt {quoted}: prompts are <server>/<name>"),
                None,
            )
        })?;
        let upstream = self
            .upstreams
            .iter()
            .find(|upstream| upstream.name() == namespace && upstream.offers().1)
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!(
                        "no prompt {quoted}: no upstream server {} offers prompts",
                        json::quote(namespace)
                    ),
                    None,
                )
            })?
            .clone();
        params.name = name.to_owned();
        upstream.prompt(params).await.map_err(|why| ErrorData::invalid_params(why, None))
    }
}

/// A listing that failed, as the client's error.
fn failed(why: String) -> ErrorData {
    ErrorData::internal_error(why, None)
}

/// Whether `uri` is one `template` (RFC 6570) can make: its literal parts in order, each
/// expression matching any text (a simple `{var}` no `/`, `?`, `#` or `&`).
fn matches(template: &str, uri: &str) -> bool {
    // Literal parts and the expressions between them.
    let mut parts: Vec<(&str, Option<&str>)> = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { return false };
        parts.push((&rest[..open], Some(&rest[open + 1..open + close])));
        rest = &rest[open + close + 1..];
    }
    parts.push((rest, None));
    let mut at = 0;
    let mut pending: Option<&str> = None;
    for (literal, expression) in parts {
        let found = match pending {
            // The text an expression matched ends where this literal starts.
            Some(expression) => {
                let position = if literal.is_empty() {
                    Some(uri.len() - at).filter(|_| expression_fits(expression, &uri[at..]))
                } else {
                    uri[at..].find(literal)
                };
                match position {
                    Some(position) if expression_fits(expression, &uri[at..at + position]) => {
                        at + position
                    }
                    _ => return false,
                }
            }
            None if uri[at..].starts_with(literal) => at,
            None => return false,
        };
        at = found + literal.len();
        pending = expression;
    }
    match pending {
        Some(expression) => expression_fits(expression, &uri[at..]),
        None => at == uri.len(),
    }
}

/// Whether an expression (`var`, `+var`, `/var`, ..) can expand to `text`.
fn expression_fits(expression: &str, text: &str) -> bool {
    match expression.chars().next() {
        // Reserved and fragment expansion, path segments, query parts: anything.
        Some('+' | '#' | '/' | '?' | '&' | '.' | ';') => true,
        // A simple expansion percent-encodes the reserved characters.
        _ => !text.is_empty() && !text.contains(['/', '?', '#', '&']),
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn uris_match_the_templates_that_make_them() {
        for (template, uri, expected) in [
            ("guarded://users/{name}", "guarded://users/ana", true),
            ("guarded://users/{name}", "guarded://users/", false),
            ("guarded://users/{name}", "guarded://users/ana/x", false),
            ("guarded://users/{name}", "guarded://teams/ana", false),
            ("test://template/{id}/data", "test://template/7/data", true),
            ("test://template/{id}/data", "test://template/7/other", false),
            ("file://{+path}", "file:///etc/hosts", true),
            ("static://motd", "static://motd", true),
            ("static://motd", "static://motd2", false),
            ("x://{a}-{b}", "x://1-2", true),
        ] {
            assert_eq!(matches(template, uri), expected, "{template} {uri}");
        }
    }
}

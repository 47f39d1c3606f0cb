//! [`Redaction`]: what a message about an upstream server must never show of its config. An
//! HTTP server's URL may carry credentials in its path (`/s/TOKEN/mcp`), query (`?api_key=`) or
//! user info, its headers a bearer token, a command's environment a key; the errors of rmcp and
//! of the HTTP client quote the URL whole. Every message that leaves an [`Upstream`] passes
//! through its redaction, so no call site has to remember which parts are secret.
//!
//! [`Upstream`]: crate::upstream::Upstream

use crate::config::Reach;

/// Secrets shorter than this are left alone: replacing every `v1` or `mcp` in a message would
/// make it unreadable and hides nothing (a credential is longer).
const SHORTEST_SECRET: usize = 6;

/// What stands for a secret part in a message.
const HIDDEN: &str = "…";

/// The spellings of one server's secrets, each with what replaces it, longest first (a secret
/// that contains another is replaced whole).
#[derive(Clone, Debug, Default)]
pub(crate) struct Redaction {
    replacements: Vec<(String, String)>,
}

impl Redaction {
    /// The secrets of `reach`: an HTTP server's URL in every spelling (replaced by its origin,
    /// `https://host:port`), its path and query, each query value, path segment and user info
    /// part, and its header values; a command's environment values.
    pub(crate) fn of(reach: &Reach) -> Self {
        let mut replacements = Vec::new();
        match reach {
            Reach::Url { url, headers, .. } => {
                if let Ok(parsed) = url::Url::parse(url) {
                    let origin = parsed.origin().ascii_serialization();
                    replacements.push((parsed.as_str().to_owned(), origin.clone()));
                    replacements.push((parsed.as_str().trim_end_matches('/').to_owned(), origin));
                    let tail = &parsed[url::Position::BeforePath..];
                    replacements.push((tail.to_owned(), format!("/{HIDDEN}")));
                    let parts = parsed
                        .path_segments()
                        .into_iter()
                        .flatten()
                        .map(str::to_owned)
                        .chain(parsed.query_pairs().map(|(_, value)| value.into_owned()))
                        .chain(parsed.query().map(str::to_owned))
                        .chain([parsed.username().to_owned()])
                        .chain(parsed.password().map(str::to_owned));
                    replacements.extend(parts.map(|part| (part, HIDDEN.to_owned())));
                }
                replacements.push((url.clone(), origin_of(url)));
                let values = headers.iter().filter_map(|(_, value)| value.to_str().ok());
                replacements.extend(values.map(|value| (value.to_owned(), HIDDEN.to_owned())));
                // A bearer token is also quoted without its scheme.
                let tokens = headers
                    .iter()
                    .filter_map(|(_, value)| value.to_str().ok()?.split_once(' '))
                    .map(|(_, token)| (token.trim().to_owned(), HIDDEN.to_owned()));
                replacements.extend(tokens.collect::<Vec<_>>());
            }
            Reach::Command { env, .. } => {
                replacements
                    .extend(env.iter().map(|(_, value)| (value.clone(), HIDDEN.to_owned())));
            }
        }
        replacements.retain(|(secret, _)| secret.len() >= SHORTEST_SECRET);
        replacements.sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        replacements.dedup_by(|(a, _), (b, _)| a == b);
        Self { replacements }
    }

    /// `message` with every secret replaced.
    pub(crate) fn apply(&self, message: &str) -> String {
        let mut message = message.to_owned();
        for (secret, instead) in &self.replacements {
            if message.contains(secret.as_str()) {
                message = message.replace(secret.as_str(), instead);
            }
        }
        message
    }
}

/// `https://host:port` of `url`, or a word that names no part of it when it does not parse.
pub(crate) fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => parsed.origin().ascii_serialization(),
        Err(_) => "its URL".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(url: &str, headers: &[(&str, &str)]) -> Reach {
        let headers = headers
            .iter()
            .map(|(name, value)| (name.parse().unwrap(), value.parse().unwrap()))
            .collect();
        Reach::Url { url: url.to_owned(), headers, oauth: None }
    }

    #[test]
    fn a_url_and_its_parts_are_never_shown() {
        let reach = url(
            "https://alice:hunter22@api.example.com:8443/s/TOKEN-1234/mcp?api_key=KEY-5678&v=2",
            &[("authorization", "Bearer sk-BEARER-99"), ("x-api-key", "HEADER-4242")],
        );
        let redaction = Redaction::of(&reach);
        for message in [
            "error sending request for url (https://alice:hunter22@api.example.com:8443/s/TOKEN-1234/mcp?api_key=KEY-5678&v=2)",
            "cannot connect to https://api.example.com:8443/s/TOKEN-1234/mcp?api_key=KEY-5678&v=2",
            "GET /s/TOKEN-1234/mcp?api_key=KEY-5678&v=2 failed",
            "path TOKEN-1234 query api_key=KEY-5678 user alice:hunter22",
            "the server said: invalid token sk-BEARER-99 (Bearer sk-BEARER-99), key HEADER-4242",
        ] {
            let shown = redaction.apply(message);
            for secret in ["TOKEN-1234", "KEY-5678", "hunter22", "sk-BEARER-99", "HEADER-4242"] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
        assert_eq!(
            redaction.apply("cannot connect to https://api.example.com:8443/s/TOKEN-1234/mcp?api_key=KEY-5678&v=2: refused"),
            "cannot connect to https://api.example.com:8443/…: refused"
        );
    }

    #[test]
    fn a_commands_environment_values_are_never_shown() {
        let reach = Reach::Command {
            argv: vec!["server".into()],
            env: vec![
                ("GITHUB_TOKEN".into(), "ghp_secret_value".into()),
                ("MODE".into(), "a".into()),
            ],
            cwd: None,
        };
        assert_eq!(
            Redaction::of(&reach).apply("auth failed for ghp_secret_value in mode a"),
            "auth failed for … in mode a"
        );
    }
}

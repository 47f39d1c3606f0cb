//! The `code-runtime mcp` config file (CLI.md): the upstream servers, an optional bindings file,
//! the languages offered, and the limits of each run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use code_runtime::json::{self, JsonValue};
use code_runtime::{Language, Limits};
use code_runtime_fixtures::{LimitsFile, read_document};

use crate::mcp::approval::{Fallback, Policy};
use indexmap::IndexMap;

/// The config, as read and checked.
#[derive(Debug)]
pub(crate) struct McpConfig {
    /// By namespace, in file order.
    pub(crate) servers: IndexMap<String, Server>,
    /// A bindings file whose namespaces, values and `call_tool` are offered beside the servers'.
    pub(crate) bindings: Option<PathBuf>,
    /// `typescript`, `python`, or both (the default), in the order the config gives.
    pub(crate) languages: Vec<Language>,
    pub(crate) limits: Limits,
    /// `approvalFallback`: what a call that needs approval gets when the client cannot ask its
    /// user (it has no elicitation).
    pub(crate) approval_fallback: Fallback,
}

/// One upstream MCP server: how to reach it, and how long one of its calls may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Server {
    pub(crate) reach: Reach,
    /// `timeoutMs`: a call that gets no answer in this time rejects (and is cancelled upstream),
    /// whatever kept it: a stuck server, or an answer too malformed to read.
    pub(crate) call_timeout: Duration,
    /// `approval`: which of its tools' calls need the user's approval.
    pub(crate) approval: Policy,
}

/// How to reach a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// A command spoken to over its stdin and stdout, with extra environment variables.
    Command { argv: Vec<String>, env: Vec<(String, String)> },
    /// A streamable HTTP endpoint.
    Url(String),
}

/// A call's default `timeoutMs`.
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl McpConfig {
    /// Reads `path`. A relative `bindings` path is relative to the config file.
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        let document = read_document(path).map_err(|error| error.to_string())?;
        let origin = path.display().to_string();
        let mut config = Self::from_json(&document, &origin)?;
        if let Some(bindings) = &config.bindings {
            if bindings.is_relative() {
                let base = path.parent().unwrap_or(Path::new("."));
                config.bindings = Some(base.join(bindings));
            }
        }
        Ok(config)
    }

    /// Reads a parsed config; `origin` names it in errors.
    pub(crate) fn from_json(document: &JsonValue, origin: &str) -> Result<Self, String> {
        let invalid = |why: String| format!("{origin}: {why}");
        let object =
            document.as_object().ok_or_else(|| invalid("expected a JSON object".into()))?;
        const KEYS: [&str; 5] = ["servers", "bindings", "languages", "limits", "approvalFallback"];
        if let Some(key) = object.keys().find(|key| !KEYS.contains(&key.as_str())) {
            return Err(invalid(format!("unknown key {} ({})", json::quote(key), KEYS.join(", "))));
        }
        let approval_fallback = match object.get("approvalFallback").map(JsonValue::as_str) {
            None | Some(Some("deny")) => Fallback::Deny,
            Some(Some("pause")) => Fallback::Pause,
            Some(_) => {
                return Err(invalid("approvalFallback must be \"deny\" or \"pause\"".into()));
            }
        };
        let servers = match object.get("servers") {
            None => IndexMap::new(),
            Some(JsonValue::Object(servers)) => servers
                .iter()
                .map(|(name, server)| {
                    Server::from_json(server)
                        .map(|server| (name.clone(), server))
                        .map_err(|why| invalid(format!("server {}: {why}", json::quote(name))))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(invalid("servers must be an object of namespace to server".into()));
            }
        };
        let bindings = match object.get("bindings") {
            None => None,
            Some(JsonValue::String(path)) if !path.is_empty() => Some(PathBuf::from(path)),
            Some(_) => return Err(invalid("bindings must be the path of a bindings file".into())),
        };
        let languages = match object.get("languages") {
            None => vec![Language::TypeScript, Language::Python],
            Some(JsonValue::Array(items)) if !items.is_empty() => {
                let mut languages: Vec<Language> = Vec::new();
                for item in items {
                    match item.as_str().map(str::parse::<Language>) {
                        Some(Ok(language)) => {
                            if !languages.contains(&language) {
                                languages.push(language);
                            }
                        }
                        _ => {
                            return Err(invalid(format!(
                                "languages: {} is not typescript or python",
                                json::encode(item)
                            )));
                        }
                    }
                }
                languages
            }
            Some(_) => {
                return Err(invalid("languages must be a non-empty array of languages".into()));
            }
        };
        let limits = match object.get("limits") {
            None => Limits::default(),
            Some(document) => LimitsFile::from_json(document, &format!("{origin}: limits"))
                .map_err(|error| error.to_string())?
                .apply(Limits::default()),
        };
        limits.validate().map_err(|error| {
            let error = error.to_string();
            invalid(error.strip_prefix("code-runtime: ").unwrap_or(&error).to_owned())
        })?;
        Ok(Self { servers, bindings, languages, limits, approval_fallback })
    }
}

impl Server {
    fn from_json(server: &JsonValue) -> Result<Self, String> {
        let object =
            server.as_object().ok_or("expected {\"command\": [...]} or {\"url\": \"...\"}")?;
        let call_timeout = match object.get("timeoutMs") {
            None => DEFAULT_CALL_TIMEOUT,
            Some(ms) => Duration::from_millis(
                ms.as_u64().filter(|ms| *ms > 0).ok_or("timeoutMs must be a positive integer")?,
            ),
        };
        let approval = match object.get("approval") {
            None => Policy::Destructive,
            Some(policy) => Policy::from_json(policy)?,
        };
        let allowed: &[&str] = match (object.get("command"), object.get("url")) {
            (Some(_), None) => &["command", "env", "timeoutMs", "approval"],
            (None, Some(_)) => &["url", "timeoutMs", "approval"],
            _ => {
                return Err(
                    "expected exactly one of command (an array) or url (a string)".to_owned()
                );
            }
        };
        if let Some(key) = object.keys().find(|key| !allowed.contains(&key.as_str())) {
            return Err(format!("unknown key {}", json::quote(key)));
        }
        let reach = match (object.get("command"), object.get("url")) {
            (Some(command), _) => {
                let argv: Option<Vec<String>> = command.as_array().and_then(|items| {
                    items.iter().map(|item| item.as_str().map(str::to_owned)).collect()
                });
                let argv = argv
                    .filter(|argv| !argv.is_empty())
                    .ok_or("command must be a non-empty array of strings")?;
                let env = match object.get("env") {
                    None => Vec::new(),
                    Some(JsonValue::Object(env)) => env
                        .iter()
                        .map(|(key, value)| match value {
                            JsonValue::String(value) => Ok((key.clone(), value.clone())),
                            _ => Err(format!("env {} must be a string", json::quote(key))),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err("env must be an object of strings".to_owned()),
                };
                Reach::Command { argv, env }
            }
            (_, Some(JsonValue::String(url)))
                if url.starts_with("http://") || url.starts_with("https://") =>
            {
                Reach::Url(url.clone())
            }
            (_, Some(url)) => {
                return Err(format!("url must be http:// or https://, got {}", json::encode(url)));
            }
            (None, None) => unreachable!("refused above"),
        };
        Ok(Self { reach, call_timeout, approval })
    }
}

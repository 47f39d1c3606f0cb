//! The `code-runtime mcp` config file (CLI.md): the upstream servers, an optional bindings file,
//! the languages offered, and the limits of each run.
//!
//! Servers come in two shapes: ours (`"servers"`, `{"command": [argv..]}` or `{"url": ..}`), and
//! the one MCP clients write (`"mcpServers"`, `{"command": "prog", "args": [..]}` or
//! `{"type": "http", "url": .., "headers": {..}}`), so a user points the gateway at the file they
//! have. Both may be in one file. `${VAR}` (or `${VAR:-default}`) in `env` and `headers` is
//! taken from the environment when the config is read ([`expand`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use code_runtime::json::{self, JsonMap, JsonValue};
use code_runtime::{Language, Limits};
use code_runtime_fixtures::{LimitsFile, read_document};
use code_runtime_providers::{ProviderSpec, PythonSetup};

use axum::http::{HeaderName, HeaderValue};
use indexmap::IndexMap;

use crate::approval::{Fallback, Policy};
use crate::authorization::OAuth;
use crate::expansion::{Environment, expand};

/// The config, as read and checked.
#[derive(Debug)]
pub struct McpConfig {
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
    /// The bytes a result is shrunk to (`maxResultTokens` times 4, at most the output budget);
    /// `None` with `"truncate": false`.
    pub(crate) result_bytes: Option<usize>,
    /// `python`: `{"interpreter": PATH, "preload": [MOD, ..]}`.
    pub(crate) python: PythonSetup,
}

/// `maxResultTokens`' default: what a model reads of one result, about 24 KB.
const DEFAULT_RESULT_TOKENS: u64 = 6_000;

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
    /// A command spoken to over its stdin and stdout, with extra environment variables, started
    /// in `cwd` (else ours).
    Command { argv: Vec<String>, env: Vec<(String, String)>, cwd: Option<PathBuf> },
    /// A streamable HTTP endpoint, and the headers every request to it carries (a bearer token,
    /// say). The values may be secrets: no message of ours shows them. With `oauth`, its token
    /// comes from the MCP authorization flow.
    Url { url: String, headers: Vec<(HeaderName, HeaderValue)>, oauth: Option<OAuth> },
}

/// A call's default `timeoutMs`.
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl McpConfig {
    /// Reads `path`, with `${VAR}` from this process's environment. A relative `bindings` path
    /// is relative to the config file.
    ///
    /// # Errors
    ///
    /// One line naming the file and what is wrong in it.
    pub fn load(path: &Path) -> Result<Self, String> {
        let document = read_document(path).map_err(|error| error.to_string())?;
        let origin = path.display().to_string();
        let environment = |name: &str| std::env::var(name).ok();
        let mut config = Self::from_json(&document, &origin, &environment)?;
        if let Some(bindings) = &config.bindings {
            if bindings.is_relative() {
                let base = path.parent().unwrap_or(Path::new("."));
                config.bindings = Some(base.join(bindings));
            }
        }
        Ok(config)
    }

    /// Whether a call that needs approval pauses its run when the client cannot ask its user
    /// (`"approvalFallback": "pause"`): the gateway then needs a checkpoint key
    /// ([`Options::checkpoint_key`](crate::Options::checkpoint_key)).
    pub fn pauses(&self) -> bool {
        self.approval_fallback == Fallback::Pause
    }

    /// The providers the config asks for, one per language in its order: process isolation,
    /// its limits (the output budget raised to the memory budget where results are shrunk, so
    /// the shrink target takes its place), Python's interpreter and preloads, warm and resident
    /// (a server runs many programs).
    pub fn provider_specs(&self) -> Vec<ProviderSpec> {
        let limits = match self.result_bytes {
            Some(_) => self.limits.shrinking(),
            None => self.limits,
        };
        self.languages
            .iter()
            .map(|language| {
                // The config's Python setup is Python's alone.
                let python = match language {
                    Language::Python => self.python.clone(),
                    _ => PythonSetup::default(),
                };
                ProviderSpec { limits, python, ..ProviderSpec::new(*language) }
            })
            .collect()
    }

    /// Reads a parsed config; `origin` names it in errors, `environment` answers `${VAR}`.
    pub(crate) fn from_json(
        document: &JsonValue,
        origin: &str,
        environment: &Environment<'_>,
    ) -> Result<Self, String> {
        let invalid = |why: String| format!("{origin}: {why}");
        let object =
            document.as_object().ok_or_else(|| invalid("expected a JSON object".into()))?;
        const KEYS: [&str; 9] = [
            "servers",
            "mcpServers",
            "bindings",
            "languages",
            "limits",
            "approvalFallback",
            "truncate",
            "maxResultTokens",
            "python",
        ];
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
        let servers = servers(object, environment).map_err(invalid)?;
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
        let result_bytes = result_bytes(object, &limits).map_err(invalid)?;
        let python = python(object).map_err(invalid)?;
        Ok(Self { servers, bindings, languages, limits, approval_fallback, result_bytes, python })
    }
}

/// `truncate` (default true) and `maxResultTokens` (default 6 000): the bytes a result is
/// shrunk to, about 4 a token and never more than the output budget.
fn result_bytes(object: &JsonMap, limits: &Limits) -> Result<Option<usize>, String> {
    let truncate = match object.get("truncate") {
        None | Some(JsonValue::Bool(true)) => true,
        Some(JsonValue::Bool(false)) => false,
        Some(_) => return Err("truncate must be true or false".into()),
    };
    let tokens = match object.get("maxResultTokens") {
        None => DEFAULT_RESULT_TOKENS,
        Some(_) if !truncate => {
            return Err("maxResultTokens shrinks results: it needs truncate true".into());
        }
        Some(tokens) => tokens
            .as_u64()
            .filter(|tokens| *tokens > 0)
            .ok_or("maxResultTokens must be a positive integer")?,
    };
    let bytes = usize::try_from(tokens.saturating_mul(4)).unwrap_or(usize::MAX);
    Ok(truncate.then(|| bytes.min(limits.output_bytes())))
}

/// `python`: the interpreter (a path, possibly a virtual environment's) and the modules to
/// preload.
fn python(object: &JsonMap) -> Result<PythonSetup, String> {
    let Some(python) = object.get("python") else { return Ok(PythonSetup::default()) };
    let python = python.as_object().ok_or("python must be an object")?;
    only(python, &["interpreter", "preload"]).map_err(|why| format!("python: {why}"))?;
    let interpreter = match python.get("interpreter") {
        None => None,
        Some(JsonValue::String(path)) if !path.is_empty() => Some(PathBuf::from(path)),
        Some(_) => return Err("python: interpreter must be the path of an interpreter".into()),
    };
    let preload = match python.get("preload") {
        None => Vec::new(),
        Some(JsonValue::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("python: preload must be an array of module names")?,
        Some(_) => return Err("python: preload must be an array of module names".into()),
    };
    Ok(PythonSetup { interpreter, preload })
}

/// The servers of both keys, by namespace, `servers` first. A name given twice, or two client
/// names that become the same namespace, is refused.
fn servers(
    object: &JsonMap,
    environment: &Environment<'_>,
) -> Result<IndexMap<String, Server>, String> {
    let mut servers = IndexMap::new();
    for (key, client) in [("servers", false), ("mcpServers", true)] {
        let entries = match object.get(key) {
            None => continue,
            Some(JsonValue::Object(entries)) => entries,
            Some(_) => return Err(format!("{key} must be an object of name to server")),
        };
        for (name, server) in entries {
            let named = |why: String| format!("{key}: server {}: {why}", json::quote(name));
            let server = if client {
                Server::from_client_json(server, environment)
            } else {
                Server::from_json(server, environment).map(Some)
            }
            .map_err(named)?;
            // A disabled client entry is kept out, as the client that wrote it keeps it out.
            let Some(server) = server else { continue };
            let namespace = if client { namespace_of(name) } else { name.clone() };
            if servers.insert(namespace.clone(), server).is_some() {
                return Err(named(format!(
                    "its namespace {} is taken by another server",
                    json::quote(&namespace)
                )));
            }
        }
    }
    Ok(servers)
}

/// The namespace a client's server name becomes: clients name servers freely
/// (`brave-search`), and a namespace is an identifier programs write, so every character that
/// cannot be in one becomes `_` (and a leading digit gets one before it).
fn namespace_of(name: &str) -> String {
    let mut namespace: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '$' { c } else { '_' })
        .collect();
    if namespace.is_empty() || namespace.starts_with(|c: char| c.is_ascii_digit()) {
        namespace.insert(0, '_');
    }
    namespace
}

impl Server {
    /// A server of our own shape: `{"command": [argv..], "env"}` or `{"url", "headers"}`, with
    /// `timeoutMs` and `approval`.
    fn from_json(server: &JsonValue, environment: &Environment<'_>) -> Result<Self, String> {
        let object =
            server.as_object().ok_or("expected {\"command\": [...]} or {\"url\": \"...\"}")?;
        let reach = match (object.get("command"), object.get("url")) {
            (Some(command), None) => {
                only(object, &["command", "env", "timeoutMs", "approval"])?;
                let argv = strings(command)
                    .filter(|argv| !argv.is_empty())
                    .ok_or("command must be a non-empty array of strings")?;
                Reach::Command { argv, env: env(object, environment)?, cwd: None }
            }
            (None, Some(url)) => {
                only(object, &["url", "headers", "oauth", "timeoutMs", "approval"])?;
                url_reach(url, object, environment)?
            }
            _ => return Err("expected exactly one of command (an array) or url (a string)".into()),
        };
        Self::with_reach(reach, object)
    }

    /// A server as MCP clients write it: `{"command": "prog", "args": [..], "env", "cwd"}` or
    /// `{"type": "http", "url", "headers"}` (`type` optional, `stdio` for a command), with our
    /// `timeoutMs` and `approval` beside, and `disabled` (`None` when true).
    fn from_client_json(
        server: &JsonValue,
        environment: &Environment<'_>,
    ) -> Result<Option<Self>, String> {
        let object = server
            .as_object()
            .ok_or("expected {\"command\": \"...\", \"args\": [...]} or {\"url\": \"...\"}")?;
        match object.get("disabled") {
            None | Some(JsonValue::Bool(false)) => {}
            Some(JsonValue::Bool(true)) => return Ok(None),
            Some(_) => return Err("disabled must be true or false".into()),
        }
        let kind = match object.get("type") {
            None => None,
            Some(JsonValue::String(kind)) => Some(kind.as_str()),
            Some(_) => return Err("type must be a string".into()),
        };
        let reach = match (kind, object.get("command"), object.get("url")) {
            (None | Some("stdio"), Some(command), None) => {
                only(
                    object,
                    &["type", "command", "args", "env", "cwd", "disabled", "timeoutMs", "approval"],
                )?;
                command_reach(command, object, environment)?
            }
            (None | Some("http" | "streamable-http" | "streamableHttp"), None, Some(url)) => {
                only(
                    object,
                    &["type", "url", "headers", "oauth", "disabled", "timeoutMs", "approval"],
                )?;
                url_reach(url, object, environment)?
            }
            (Some("sse"), ..) => {
                return Err("type \"sse\" (the old HTTP+SSE transport) is not supported: give \
                     the server's streamable HTTP url with type \"http\""
                    .into());
            }
            (Some(kind @ ("stdio" | "http" | "streamable-http" | "streamableHttp")), ..) => {
                let needs = if kind == "stdio" { "command" } else { "url" };
                return Err(format!("type {} needs {needs} (and only it)", json::quote(kind)));
            }
            (Some(kind), ..) => {
                return Err(format!("type {} is not stdio or http", json::quote(kind)));
            }
            (None, ..) => {
                return Err("expected exactly one of command (a string) or url (a string)".into());
            }
        };
        Self::with_reach(reach, object).map(Some)
    }

    /// The server that `reach` gets to, with the `timeoutMs` and `approval` of `object`.
    fn with_reach(reach: Reach, object: &JsonMap) -> Result<Self, String> {
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
        Ok(Self { reach, call_timeout, approval })
    }
}

/// Refuses a key of `object` not in `allowed`.
fn only(object: &JsonMap, allowed: &[&str]) -> Result<(), String> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!("unknown key {} ({})", json::quote(key), allowed.join(", "))),
        None => Ok(()),
    }
}

/// An array of strings, as strings.
fn strings(value: &JsonValue) -> Option<Vec<String>> {
    value.as_array()?.iter().map(|item| item.as_str().map(str::to_owned)).collect()
}

/// A client's `command` (a string), `args`, `env` and `cwd`.
fn command_reach(
    command: &JsonValue,
    object: &JsonMap,
    environment: &Environment<'_>,
) -> Result<Reach, String> {
    let program = command
        .as_str()
        .filter(|program| !program.is_empty())
        .ok_or("command must be a non-empty string (its arguments go in args)")?;
    let mut argv = vec![program.to_owned()];
    match object.get("args") {
        None => {}
        Some(args) => argv.extend(strings(args).ok_or("args must be an array of strings")?),
    }
    let cwd = match object.get("cwd") {
        None => None,
        Some(JsonValue::String(cwd)) if !cwd.is_empty() => Some(PathBuf::from(cwd)),
        Some(_) => return Err("cwd must be a directory's path".into()),
    };
    Ok(Reach::Command { argv, env: env(object, environment)?, cwd })
}

/// `env`, an object of strings, each expanded.
fn env(object: &JsonMap, environment: &Environment<'_>) -> Result<Vec<(String, String)>, String> {
    match object.get("env") {
        None => Ok(Vec::new()),
        Some(JsonValue::Object(env)) => env
            .iter()
            .map(|(key, value)| {
                let value = value
                    .as_str()
                    .ok_or_else(|| format!("env {} must be a string", json::quote(key)))?;
                let value = expand(value, environment)
                    .map_err(|why| format!("env {}: {why}", json::quote(key)))?;
                Ok((key.clone(), value))
            })
            .collect(),
        Some(_) => Err("env must be an object of strings".into()),
    }
}

/// The headers the streamable HTTP transport sets itself, which a config may not replace.
const TRANSPORT_HEADERS: [&str; 8] = [
    "accept",
    "content-type",
    "content-length",
    "host",
    "connection",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// `url` (http or https) and `headers`, each value expanded and checked as a header.
fn url_reach(
    url: &JsonValue,
    object: &JsonMap,
    environment: &Environment<'_>,
) -> Result<Reach, String> {
    let url = match url {
        JsonValue::String(url) if url.starts_with("http://") || url.starts_with("https://") => {
            url.clone()
        }
        _ => return Err(format!("url must be http:// or https://, got {}", json::encode(url))),
    };
    let oauth = match object.get("oauth") {
        None => None,
        Some(oauth) => OAuth::from_json(oauth, environment)?,
    };
    let entries = match object.get("headers") {
        None => return Ok(Reach::Url { url, headers: Vec::new(), oauth }),
        Some(JsonValue::Object(entries)) => entries,
        Some(_) => return Err("headers must be an object of strings".into()),
    };
    let mut headers = Vec::new();
    for (name, value) in entries {
        let quoted = json::quote(name);
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("headers: {quoted} is not a header name"))?;
        if TRANSPORT_HEADERS.contains(&header.as_str()) {
            return Err(format!("headers: {quoted} is set by the transport itself"));
        }
        if oauth.is_some() && header == axum::http::header::AUTHORIZATION {
            return Err(format!("headers: {quoted} is set by oauth: give one or the other"));
        }
        let value = value.as_str().ok_or_else(|| format!("headers: {quoted} must be a string"))?;
        let value =
            expand(value, environment).map_err(|why| format!("headers: {quoted}: {why}"))?;
        // The value is not shown: it is likely a secret.
        let value = HeaderValue::from_str(&value).map_err(|_| {
            format!("headers: {quoted}: its value is not a header value (a control character?)")
        })?;
        headers.push((header, value));
    }
    Ok(Reach::Url { url, headers, oauth })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::expansion::test_environment as environment;

    #[test]
    fn python_names_an_interpreter_and_modules_to_preload() {
        let parse = |text: &str| {
            let document = code_runtime::json::parse(text).unwrap();
            McpConfig::from_json(&document, "config.json", &environment).map(|config| config.python)
        };
        assert_eq!(parse("{}"), Ok(PythonSetup::default()));
        assert_eq!(
            parse(
                r#"{"python": {"interpreter": "/venv/bin/python", "preload": ["numpy", "pandas"]}}"#
            ),
            Ok(PythonSetup {
                interpreter: Some(PathBuf::from("/venv/bin/python")),
                preload: vec!["numpy".to_owned(), "pandas".to_owned()],
            })
        );
        for (text, why) in [
            (r#"{"python": "/venv/bin/python"}"#, "python must be an object"),
            (r#"{"python": {"interpreter": ""}}"#, "interpreter must be the path"),
            (r#"{"python": {"preload": "numpy"}}"#, "preload must be an array of module names"),
            (r#"{"python": {"preload": [1]}}"#, "preload must be an array of module names"),
            (r#"{"python": {"venv": "x"}}"#, "python: unknown key \"venv\""),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.starts_with("config.json: ") && error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn client_names_become_identifiers() {
        assert_eq!(namespace_of("brave-search"), "brave_search");
        assert_eq!(namespace_of("github"), "github");
        assert_eq!(namespace_of("my.server v2"), "my_server_v2");
        assert_eq!(namespace_of("1password"), "_1password");
        assert_eq!(namespace_of(""), "_");
    }
}

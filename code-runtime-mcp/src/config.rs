//! The `code-runtime mcp` config file (docs/cli.md): the upstream servers, an optional bindings file,
//! the languages offered, and the limits of each run.
//!
//! Servers come in two shapes: ours (`"servers"`, `{"command": [argv..]}` or `{"url": ..}`), and
//! the one MCP clients write (`"mcpServers"`, `{"command": "prog", "args": [..]}` or
//! `{"type": "http", "url": .., "headers": {..}}`), so a user points the gateway at the file they
//! have. Both may be in one file. `${VAR}` (or `${VAR:-default}`) in `env` and `headers` is
//! taken from the environment when the config is read ([`expand`]).
//!
//! Serde reads the file into [`file`]'s shapes, refusing unknown keys and wrong types; the
//! checks here hold what types cannot (which keys go with `command` and which with `url`, a
//! header's name and expanded value, one namespace per server). Every error names the key path
//! of the value (`mcpServers."brave-search".args[1]: ...`) and shows no string value from the
//! file, which may be a secret.

use std::path::{Path, PathBuf};
use std::time::Duration;

use code_runtime::json::{self, JsonValue};
use code_runtime::{Language, Limits};
use code_runtime_fixtures::{KeyPath, Object, Positive, Text, from_document, read_document};
use code_runtime_providers::{ProviderSpec, PythonSetup};

use axum::http::{HeaderName, HeaderValue};
use indexmap::IndexMap;

use crate::approval::{Fallback, Policy};
use crate::authorization::{OAuth, OAuthEntry};
use crate::expansion::{Environment, expand};

use self::file::{Argv, ClientServer, ConfigFile, HttpUrl, Languages, OwnServer, Program};

mod file;

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
        let Object(file) = from_document::<Object<ConfigFile>>(document, origin)
            .map_err(|error| error.to_string())?;
        Self::from_file(file, environment).map_err(|why| format!("{origin}: {why}"))
    }

    /// The config `file` holds, its servers' keys checked to go together and expanded.
    fn from_file(file: ConfigFile, environment: &Environment<'_>) -> Result<Self, String> {
        let root = KeyPath::root();
        let servers = servers(file.servers, file.mcp_servers, environment)?;
        let languages = match file.languages {
            None => vec![Language::TypeScript, Language::Python],
            Some(Languages(languages)) => languages,
        };
        let limits = file.limits.unwrap_or_default().apply(Limits::default());
        limits.validate().map_err(|error| {
            let error = error.to_string();
            error.strip_prefix("code-runtime: ").unwrap_or(&error).to_owned()
        })?;
        let truncate = file.truncate.unwrap_or(true);
        let tokens = match file.max_result_tokens {
            None => DEFAULT_RESULT_TOKENS,
            Some(_) if !truncate => {
                let why = "shrinks results: it needs truncate true";
                return Err(root.key("maxResultTokens").invalid(why));
            }
            Some(Positive(tokens)) => tokens,
        };
        // About 4 bytes a token, and never more than the output budget.
        let bytes = usize::try_from(tokens.saturating_mul(4)).unwrap_or(usize::MAX);
        let result_bytes = truncate.then(|| bytes.min(limits.output_bytes()));
        let python = file.python.map_or_else(PythonSetup::default, |Object(python)| PythonSetup {
            interpreter: python.interpreter.map(|Text(path)| PathBuf::from(path)),
            preload: python
                .preload
                .unwrap_or_default()
                .into_iter()
                .map(|Text(name)| name)
                .collect(),
        });
        Ok(Self {
            servers,
            bindings: file.bindings.map(|Text(path)| PathBuf::from(path)),
            languages,
            limits,
            approval_fallback: file.approval_fallback,
            result_bytes,
            python,
        })
    }
}

/// The servers of both keys, by namespace, `servers` first. A name given twice, or two client
/// names that become the same namespace, is refused; a disabled client entry is left out, as
/// the client that wrote it leaves it out.
fn servers(
    own: IndexMap<String, Object<OwnServer>>,
    clients: IndexMap<String, Object<ClientServer>>,
    environment: &Environment<'_>,
) -> Result<IndexMap<String, Server>, String> {
    let mut servers = IndexMap::new();
    let mut add = |at: KeyPath, namespace: String, server: Server| {
        if servers.insert(namespace.clone(), server).is_some() {
            let why =
                format!("its namespace {} is taken by another server", json::quote(&namespace));
            return Err(at.invalid(why));
        }
        Ok(())
    };
    for (name, Object(server)) in own {
        let at = KeyPath::root().key("servers").key(&name);
        let server = server.check(&at, environment)?;
        add(at, name, server)?;
    }
    for (name, Object(server)) in clients {
        let at = KeyPath::root().key("mcpServers").key(&name);
        if let Some(server) = server.check(&at, environment)? {
            add(at, namespace_of(&name), server)?;
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

impl OwnServer {
    /// The server at `at`: a command or a url, each with only its own keys.
    fn check(self, at: &KeyPath, environment: &Environment<'_>) -> Result<Server, String> {
        let reach = match (self.command, self.url) {
            (Some(Argv(argv)), None) => {
                alone(
                    at,
                    "command",
                    &[("headers", self.headers.is_some()), ("oauth", self.oauth.is_some())],
                )?;
                Reach::Command { argv, env: env(self.env, at, environment)?, cwd: None }
            }
            (None, Some(url)) => {
                alone(at, "url", &[("env", self.env.is_some())])?;
                url_reach(url, self.headers, self.oauth, at, environment)?
            }
            _ => {
                let why = "expected exactly one of command (an array) or url (a string)";
                return Err(at.invalid(why));
            }
        };
        Ok(Server::new(reach, self.timeout_ms, self.approval))
    }
}

impl ClientServer {
    /// The server at `at` (`None` when disabled): a command (`type` `stdio`, or none) or a url
    /// (`type` `http`, or none), each with only its own keys.
    fn check(self, at: &KeyPath, environment: &Environment<'_>) -> Result<Option<Server>, String> {
        if self.disabled {
            return Ok(None);
        }
        let reach = match (self.kind.as_deref(), self.command, self.url) {
            (None | Some("stdio"), Some(Program(program)), None) => {
                alone(
                    at,
                    "command",
                    &[("headers", self.headers.is_some()), ("oauth", self.oauth.is_some())],
                )?;
                let mut argv = vec![program];
                argv.extend(self.args.unwrap_or_default());
                let cwd = self.cwd.map(|Text(cwd)| PathBuf::from(cwd));
                Reach::Command { argv, env: env(self.env, at, environment)?, cwd }
            }
            (None | Some("http" | "streamable-http" | "streamableHttp"), None, Some(url)) => {
                let command_keys = [
                    ("args", self.args.is_some()),
                    ("env", self.env.is_some()),
                    ("cwd", self.cwd.is_some()),
                ];
                alone(at, "url", &command_keys)?;
                url_reach(url, self.headers, self.oauth, at, environment)?
            }
            (Some("sse"), ..) => {
                return Err(at.key("type").invalid(
                    "\"sse\" (the old HTTP+SSE transport) is not supported: give the server's \
                     streamable HTTP url with type \"http\"",
                ));
            }
            (Some(kind @ ("stdio" | "http" | "streamable-http" | "streamableHttp")), ..) => {
                let needs = if kind == "stdio" { "command" } else { "url" };
                let why = format!("type {} needs {needs} (and only it)", json::quote(kind));
                return Err(at.invalid(why));
            }
            (Some(kind), ..) => {
                let why = format!("{} is not stdio or http", json::quote(kind));
                return Err(at.key("type").invalid(why));
            }
            (None, ..) => {
                let why = "expected exactly one of command (a string) or url (a string)";
                return Err(at.invalid(why));
            }
        };
        Ok(Some(Server::new(reach, self.timeout_ms, self.approval)))
    }
}

impl Server {
    /// The server `reach` gets to, with its `timeoutMs` and `approval` or their defaults.
    fn new(reach: Reach, timeout: Option<Positive>, approval: Option<Policy>) -> Self {
        Self {
            reach,
            call_timeout: timeout
                .map_or(DEFAULT_CALL_TIMEOUT, |Positive(ms)| Duration::from_millis(ms)),
            approval: approval.unwrap_or(Policy::Destructive),
        }
    }
}

/// Refuses, in the server at `at` reached by `reach` (`command` or `url`), each key of the
/// other way that is `given`.
fn alone(at: &KeyPath, reach: &str, keys: &[(&str, bool)]) -> Result<(), String> {
    let other = if reach == "url" { "command" } else { "url" };
    match keys.iter().find(|(_, given)| *given) {
        Some((key, _)) => Err(at.invalid(format!("{key} goes with {other}, not {reach}"))),
        None => Ok(()),
    }
}

/// `env`, each value expanded.
fn env(
    env: Option<IndexMap<String, String>>,
    at: &KeyPath,
    environment: &Environment<'_>,
) -> Result<Vec<(String, String)>, String> {
    env.unwrap_or_default()
        .into_iter()
        .map(|(key, value)| {
            let value =
                expand(&value, environment).map_err(|why| at.key("env").key(&key).invalid(why))?;
            Ok((key, value))
        })
        .collect()
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

/// `url`, `oauth` and `headers`, each header's value expanded and checked as one.
fn url_reach(
    HttpUrl(url): HttpUrl,
    headers: Option<IndexMap<String, String>>,
    oauth: Option<OAuthEntry>,
    at: &KeyPath,
    environment: &Environment<'_>,
) -> Result<Reach, String> {
    let oauth = match oauth {
        None => None,
        Some(oauth) => OAuth::from_entry(oauth, &at.key("oauth"), environment)?,
    };
    let mut checked = Vec::new();
    for (name, value) in headers.unwrap_or_default() {
        let at = at.key("headers").key(&name);
        let header =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| at.invalid("not a header name"))?;
        if TRANSPORT_HEADERS.contains(&header.as_str()) {
            return Err(at.invalid("set by the transport itself"));
        }
        if oauth.is_some() && header == axum::http::header::AUTHORIZATION {
            return Err(at.invalid("set by oauth: give one or the other"));
        }
        let value = expand(&value, environment).map_err(|why| at.invalid(why))?;
        // The value is not shown: it is likely a secret.
        let value = HeaderValue::from_str(&value)
            .map_err(|_| at.invalid("its value is not a header value (a control character?)"))?;
        checked.push((header, value));
    }
    Ok(Reach::Url { url, headers: checked, oauth })
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
            (
                r#"{"python": "/venv/bin/python"}"#,
                "python: invalid type: a string, expected {\"interpreter\": PATH, \"preload\": [MODULE, ..]}",
            ),
            (
                r#"{"python": {"interpreter": ""}}"#,
                "python.interpreter: invalid length 0, expected a non-empty string",
            ),
            (
                r#"{"python": {"preload": "numpy"}}"#,
                "python.preload: invalid type: a string, expected a sequence",
            ),
            (
                r#"{"python": {"preload": [1]}}"#,
                "python.preload[0]: invalid type: integer `1`, expected a string",
            ),
            (
                r#"{"python": {"venv": "x"}}"#,
                "python: unknown field `venv`, expected `interpreter` or `preload`",
            ),
        ] {
            assert_eq!(parse(text).unwrap_err(), format!("config.json: {why}"), "{text}");
        }
    }

    fn parse(text: &str) -> Result<McpConfig, String> {
        let document = code_runtime::json::parse(text).unwrap();
        McpConfig::from_json(&document, "config.json", &environment)
    }

    #[test]
    fn both_shapes_read_into_servers_by_namespace() {
        let config = parse(
            r#"{"servers": {"own": {"command": ["prog", "-v"], "env": {"A": "${TOKEN}"},
                                    "timeoutMs": 5, "approval": ["delete_*"]}},
                "mcpServers": {
                  "brave-search": {"command": "npx", "args": ["-y", "s"], "cwd": "/w"},
                  "remote": {"type": "streamable-http", "url": "https://h/mcp",
                             "headers": {"X-Key": "k"},
                             "oauth": {"clientId": "c", "scopes": "read  write"}},
                  "off": {"command": "x", "disabled": true},
                  "plain": {"url": "http://h/mcp", "oauth": false, "approval": "none"}},
                "languages": ["python", "python"], "approvalFallback": "pause",
                "maxResultTokens": 10, "limits": {"timeoutMs": 1000}}"#,
        )
        .unwrap();
        let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
        assert_eq!(names, ["own", "brave_search", "remote", "plain"]);
        let own = &config.servers["own"];
        assert_eq!(
            own.reach,
            Reach::Command {
                argv: vec!["prog".into(), "-v".into()],
                env: vec![("A".into(), "t0k".into())],
                cwd: None
            }
        );
        assert_eq!(own.call_timeout, Duration::from_millis(5));
        assert_eq!(own.approval, Policy::Named(vec!["delete_*".into()]));
        let Reach::Command { argv, cwd, .. } = &config.servers["brave_search"].reach else {
            panic!("a command")
        };
        assert_eq!((argv.join(" "), cwd.clone()), ("npx -y s".into(), Some(PathBuf::from("/w"))));
        let Reach::Url { url, headers, oauth } = &config.servers["remote"].reach else {
            panic!("a url")
        };
        assert_eq!((url.as_str(), headers.len()), ("https://h/mcp", 1));
        assert_eq!(oauth.as_ref().unwrap().scopes, ["read", "write"]);
        let plain = &config.servers["plain"];
        assert!(matches!(&plain.reach, Reach::Url { oauth: None, .. }));
        assert_eq!(
            (plain.approval.clone(), plain.call_timeout),
            (Policy::None, DEFAULT_CALL_TIMEOUT)
        );
        assert_eq!(config.languages, [Language::Python]);
        assert!(config.pauses());
        assert_eq!((config.result_bytes, config.limits.max_wall_ms), (Some(40), 1000));
    }

    #[test]
    fn mistakes_name_their_key_path_and_never_show_a_string_value() {
        for (text, why) in [
            ("[]", "invalid type: sequence, expected a config object"),
            (
                r#"{"servers": {"x": "http://u:s3cret@h"}}"#,
                r#"servers.x: invalid type: a string, expected a server: {"command": [...]} or {"url": "..."}"#,
            ),
            (
                r#"{"servers": {"x": {"url": "ftp://u:s3cret@h"}}}"#,
                "servers.x.url: must be http:// or https://",
            ),
            (
                r#"{"servers": {"x": {"url": "http://h", "headers": "Bearer s3cret"}}}"#,
                "servers.x.headers: invalid type: a string, expected a map",
            ),
            (
                r#"{"servers": {"x": {"command": ["a"], "env": "S3CRET=1"}}}"#,
                "servers.x.env: invalid type: a string, expected a map",
            ),
            (
                r#"{"servers": {"x": {"url": "http://h", "oauth": "s3cret"}}}"#,
                "servers.x.oauth: invalid type: a string, expected true, false or an object",
            ),
            (
                r#"{"servers": {"x": {"command": "s3cret --flag"}}}"#,
                "servers.x.command: invalid type: a string, expected a non-empty array of strings: the program, then its arguments",
            ),
            (
                r#"{"servers": {"x": {"command": ["a"], "approval": "s3cret"}}}"#,
                r#"servers.x.approval: invalid value: a string, expected "none", "destructive", "all" or an array of tool names or globs"#,
            ),
            (
                r#"{"servers": {"x": {}}}"#,
                "servers.x: expected exactly one of command (an array) or url (a string)",
            ),
            (
                r#"{"servers": {"x": {"command": ["a"], "url": "http://h"}}}"#,
                "servers.x: expected exactly one of command (an array) or url (a string)",
            ),
            (
                r#"{"mcpServers": {"x": {"url": "http://h", "args": []}}}"#,
                "mcpServers.x: args goes with command, not url",
            ),
            (
                r#"{"mcpServers": {"x": {"command": "a", "disabled": true, "autoApprove": []}}}"#,
                "mcpServers.x: unknown field `autoApprove`, expected one of `type`, `command`, `args`, `env`, `cwd`, `url`, `headers`, `oauth`, `disabled`, `timeoutMs`, `approval`",
            ),
            (
                r#"{"languages": []}"#,
                "languages: invalid length 0, expected a non-empty array of languages",
            ),
            (
                r#"{"approvalFallback": "ask"}"#,
                "approvalFallback: unknown variant `ask`, expected `deny` or `pause`",
            ),
            (r#"{"bindings": ""}"#, "bindings: invalid length 0, expected a non-empty string"),
            (
                r#"{"limits": {"heapMb": 1}}"#,
                "limits: unknown limit \"heapMb\" (computeMs, timeoutMs, maxOutputBytes, memoryMb, maxCalls, maxCallsPerFunction, maxPendingCalls, maxSessionBytes, sessionIdleMs, maxSessions)",
            ),
            (
                r#"{"limits": {"timeoutMs": 1.5}}"#,
                "limits.timeoutMs: invalid type: floating point `1.5`, expected a non-negative integer",
            ),
            (
                r#"{"mcpServers": {"x": {"url": "http://h", "oauth": {"scopes": 3}}}}"#,
                "mcpServers.x.oauth.scopes: invalid type: integer `3`, expected an array of scope names, or one space-separated string",
            ),
            (
                r#"{"mcpServers": {"x": {"url": "http://h", "oauth": {"clientId": ""}}}}"#,
                "mcpServers.x.oauth.clientId: invalid length 0, expected a non-empty string",
            ),
        ] {
            let error = parse(text).unwrap_err();
            assert_eq!(error, format!("config.json: {why}"), "{text}");
            assert!(!error.contains("s3cret") && !error.contains("S3CRET"), "{error}");
        }
    }

    #[test]
    fn a_config_nesting_deeper_than_serde_walks_is_refused_not_a_crash() {
        for depth in [200, 100_000] {
            let text = format!(
                r#"{{"servers": {{"x": {{"command": ["a"], "approval": {}{}}}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            assert_eq!(
                parse(&text).unwrap_err(),
                "config.json: servers.x.approval[0]...: nests deeper than 128 levels"
            );
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

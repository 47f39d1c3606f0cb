//! The config file as written, read by serde: a key no shape knows and a value of the wrong
//! type are refused here, with the key path of the value. What serde cannot say (which keys go
//! together, what `${VAR}` expands to) is checked when [`McpConfig`](super::McpConfig) is made.

use std::fmt;

use code_runtime::Language;
use code_runtime::json;
use code_runtime_fixtures::{LimitsFile, Object, ObjectShape, Positive, Text};
use indexmap::IndexMap;
use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use crate::approval::{Fallback, Policy};
use crate::authorization::OAuthEntry;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ConfigFile {
    #[serde(default)]
    pub(crate) servers: IndexMap<String, Object<OwnServer>>,
    #[serde(default)]
    pub(crate) mcp_servers: IndexMap<String, Object<ClientServer>>,
    pub(crate) bindings: Option<Text>,
    pub(crate) languages: Option<Languages>,
    pub(crate) limits: Option<LimitsFile>,
    #[serde(default)]
    pub(crate) approval_fallback: Fallback,
    pub(crate) truncate: Option<bool>,
    pub(crate) max_result_tokens: Option<Positive>,
    pub(crate) python: Option<Object<PythonEntry>>,
}

/// A server of our own shape: `{"command": [argv..], "env"}` or `{"url", "headers", "oauth"}`,
/// with `timeoutMs` and `approval`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct OwnServer {
    pub(crate) command: Option<Argv>,
    pub(crate) env: Option<IndexMap<String, String>>,
    pub(crate) url: Option<HttpUrl>,
    pub(crate) headers: Option<IndexMap<String, String>>,
    pub(crate) oauth: Option<OAuthEntry>,
    pub(crate) timeout_ms: Option<Positive>,
    pub(crate) approval: Option<Policy>,
}

/// A server as MCP clients write it: `{"command": "prog", "args": [..], "env", "cwd"}` or
/// `{"type": "http", "url", "headers", "oauth"}` (`type` optional, `stdio` for a command), with
/// our `timeoutMs` and `approval` beside, and `disabled`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClientServer {
    #[serde(rename = "type")]
    pub(crate) kind: Option<String>,
    pub(crate) command: Option<Program>,
    pub(crate) args: Option<Vec<String>>,
    pub(crate) env: Option<IndexMap<String, String>>,
    pub(crate) cwd: Option<Text>,
    pub(crate) url: Option<HttpUrl>,
    pub(crate) headers: Option<IndexMap<String, String>>,
    pub(crate) oauth: Option<OAuthEntry>,
    #[serde(default)]
    pub(crate) disabled: bool,
    pub(crate) timeout_ms: Option<Positive>,
    pub(crate) approval: Option<Policy>,
}

/// `python`: the interpreter (a path, possibly a virtual environment's) and the modules to
/// preload.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PythonEntry {
    pub(crate) interpreter: Option<Text>,
    pub(crate) preload: Option<Vec<Text>>,
}

impl ObjectShape for ConfigFile {
    const EXPECTED: &'static str = "a config object";
}

impl ObjectShape for OwnServer {
    const EXPECTED: &'static str = r#"a server: {"command": [...]} or {"url": "..."}"#;
}

impl ObjectShape for ClientServer {
    const EXPECTED: &'static str =
        r#"a server: {"command": "...", "args": [...]} or {"url": "..."}"#;
}

impl ObjectShape for PythonEntry {
    const EXPECTED: &'static str = r#"{"interpreter": PATH, "preload": [MODULE, ..]}"#;
}

/// Our `command`: the program and its arguments, at least the program.
#[derive(Debug)]
pub(crate) struct Argv(pub(crate) Vec<String>);

/// A client's `command`: the program alone.
#[derive(Debug)]
pub(crate) struct Program(pub(crate) String);

/// A `url` of the streamable HTTP transport: http or https.
#[derive(Debug)]
pub(crate) struct HttpUrl(pub(crate) String);

/// `languages`: at least one, each once, in the order given.
#[derive(Debug)]
pub(crate) struct Languages(pub(crate) Vec<Language>);

impl<'de> Deserialize<'de> for Argv {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ArgvVisitor)
    }
}

/// Reads our `command`, which a client's string must not be taken for.
struct ArgvVisitor;

impl<'de> Visitor<'de> for ArgvVisitor {
    type Value = Argv;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-empty array of strings: the program, then its arguments")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Argv, A::Error> {
        let mut argv = Vec::new();
        while let Some(item) = items.next_element()? {
            argv.push(item);
        }
        if argv.is_empty() {
            return Err(de::Error::invalid_length(0, &self));
        }
        Ok(Argv(argv))
    }
}

impl<'de> Deserialize<'de> for Program {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ProgramVisitor)
    }
}

/// Reads a client's `command`, which our array must not be taken for.
struct ProgramVisitor;

impl Visitor<'_> for ProgramVisitor {
    type Value = Program;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a non-empty string (its arguments go in args)")
    }

    fn visit_str<E: de::Error>(self, program: &str) -> Result<Program, E> {
        if program.is_empty() {
            return Err(E::invalid_length(0, &self));
        }
        Ok(Program(program.to_owned()))
    }
}

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let url = String::deserialize(deserializer)?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            // The URL is not shown: it may carry a token.
            return Err(de::Error::custom("must be http:// or https://"));
        }
        Ok(Self(url))
    }
}

impl<'de> Deserialize<'de> for Languages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        if names.is_empty() {
            return Err(de::Error::invalid_length(0, &"a non-empty array of languages"));
        }
        let mut languages: Vec<Language> = Vec::new();
        for name in names {
            let language = name.parse().map_err(|_| {
                de::Error::custom(format_args!(
                    "{} is not typescript or python",
                    json::quote(&name)
                ))
            })?;
            if !languages.contains(&language) {
                languages.push(language);
            }
        }
        Ok(Self(languages))
    }
}

//! The upstream MCP servers: each one's tools as one binding namespace, its calls as MCP
//! `tools/call` requests, and its connection made again after it dies.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use code_runtime::json::{self, JsonValue};
use code_runtime::{
    ApprovalRule, BindingArgs, BindingError, BindingFunction, CodeBindingNamespace, binding,
};
use code_runtime_fixtures::Recorder;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, GetPromptRequestParams, GetPromptResult,
    Prompt, ReadResourceRequestParams, ReadResourceResult, Resource, ResourceTemplate, Tool,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::Mutex;

use crate::authorization::{AUTHORIZE_WITHIN, Authorization};
use crate::config::{Reach, Server};
use crate::redaction::{Redaction, origin_of};
use crate::relay::{Downstream, Relay, RelayHandler};

/// How long connecting to a server (starting it, `initialize`, `tools/list`) may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(30);

/// The most host memory the value parsed from a tool's text may hold ([`json::parse_within`]).
const MAX_VALUE_BYTES: usize = 256 << 20;

type Client = RunningService<RoleClient, RelayHandler>;

/// One upstream server: how to reach it, and the connection, made again when it has closed.
pub(crate) struct Upstream {
    namespace: String,
    server: Server,
    client: Mutex<Option<Client>>,
    stderr: Arc<Stderr>,
    /// Whether it offers resources, and prompts (its capabilities when it was connected).
    offers: (bool, bool),
    /// The clients its calls in flight serve, for what it asks them.
    relay: Arc<Relay>,
    /// Its tokens, with `oauth` (kept across reconnections).
    authorization: Option<Arc<Authorization>>,
    /// What no message about it may show; every error leaving it passes through.
    redaction: Redaction,
}

/// What a command server writes on stderr: kept (its last line names why it failed to start),
/// and passed on to ours, prefixed, once the server is serving (before that, a config that
/// cannot serve is one line of ours, as every misuse is).
#[derive(Default)]
struct Stderr {
    last: std::sync::Mutex<String>,
    forward: AtomicBool,
}

/// What a server offers, read when it is connected.
pub(crate) struct Offer {
    pub(crate) tools: Vec<Tool>,
    /// The server's `instructions`, or its name and version.
    pub(crate) description: Option<String>,
}

impl Upstream {
    /// Connects to `server` and lists its tools.
    pub(crate) async fn connect(
        namespace: &str,
        server: Server,
    ) -> Result<(Arc<Self>, Offer), String> {
        let redaction = Redaction::of(&server.reach);
        let failed = |why: String| {
            redaction.apply(&format!("upstream server {}: {why}", json::quote(namespace)))
        };
        let stderr = Arc::new(Stderr::default());
        let relay = Arc::new(Relay::default());
        let authorization = match &server.reach {
            Reach::Url { url, oauth: Some(oauth), .. } => {
                Some(Authorization::new(namespace, url, oauth.clone()).await.map_err(failed)?)
            }
            _ => None,
        };
        let within = connect_within(&server);
        let connecting = connect(namespace, &server, &stderr, &relay, authorization.as_ref());
        let client = tokio::time::timeout(within, connecting)
            .await
            .map_err(|_| failed(format!("no answer within {} s", within.as_secs())))?
            .map_err(|why| failed(stderr.explained(why)))?;
        let tools = tokio::time::timeout(within, client.list_all_tools())
            .await
            .map_err(|_| failed("tools/list got no answer".to_owned()))?
            .map_err(|error| failed(format!("tools/list failed: {error}")))?;
        let description = client.peer_info().and_then(|info| {
            info.instructions.clone().or_else(|| {
                info.server_info.as_ref().map(|about| format!("{} {}", about.name, about.version))
            })
        });
        let offers = client.peer_info().map_or((false, false), |info| {
            (info.capabilities.resources.is_some(), info.capabilities.prompts.is_some())
        });
        let upstream = Self {
            namespace: namespace.to_owned(),
            server,
            client: Mutex::new(Some(client)),
            stderr,
            offers,
            relay,
            authorization,
            redaction,
        };
        Ok((Arc::new(upstream), Offer { tools, description }))
    }

    /// The namespace of `offer`'s tools: each tool a function with its description and schemas,
    /// rejecting with `<Namespace>ToolError` (member `toolName`); each call is recorded.
    pub(crate) fn namespace(
        self: &Arc<Self>,
        offer: &Offer,
        recorder: &Recorder,
    ) -> CodeBindingNamespace {
        let mut namespace = CodeBindingNamespace::new(self.namespace.clone())
            .error_class(format!("{}ToolError", pascal(&self.namespace)), "toolName");
        if let Some(description) = &offer.description {
            namespace = namespace.description(description.clone());
        }
        for tool in &offer.tools {
            namespace = namespace.function(tool.name.to_string(), self.function(tool, recorder));
        }
        namespace
    }

    fn function(self: &Arc<Self>, tool: &Tool, recorder: &Recorder) -> BindingFunction {
        let (upstream, recorder, name) = (self.clone(), recorder.clone(), tool.name.to_string());
        let mut function = binding(move |args| {
            let (upstream, recorder, name) = (upstream.clone(), recorder.clone(), name.clone());
            async move {
                if !recorder.is_on() {
                    return upstream.call(&name, args).await;
                }
                // Encoding a line (as large as the run's memory budget) and writing it to disk
                // happen on a blocking thread: the threads that serve every client never wait
                // for them.
                let namespace = upstream.namespace.clone();
                let (recording, args) = blocking(move || {
                    let recording = recorder.start_call(&namespace, &name, &args);
                    (recording, (args, name))
                })
                .await?;
                let (args, name) = args;
                let outcome = upstream.call(&name, args).await;
                let Some(recording) = recording else { return outcome };
                blocking(move || match recording.finish(&outcome) {
                    Err(full) => Err(full.into_binding_error()),
                    Ok(()) => outcome,
                })
                .await?
            }
        });
        if let Some(description) = &tool.description {
            function = function.description(description.to_string());
        }
        function = function
            .input(JsonValue::from(&serde_json::Value::Object((*tool.input_schema).clone())));
        if let Some(output) = &tool.output_schema {
            function =
                function.output(JsonValue::from(&serde_json::Value::Object((**output).clone())));
        }
        if self.server.approval.covers(tool) {
            function = function.approval(ApprovalRule::Always);
        }
        function
    }

    /// One `tools/call`. A connection found closed is made again first; a call that fails
    /// because the connection closed under it is not repeated (the tool may have acted), and
    /// rejects saying so. The rejection shows none of the server's secrets.
    async fn call(&self, name: &str, args: BindingArgs) -> Result<JsonValue, BindingError> {
        self.call_unredacted(name, args).await.map_err(|error| {
            let redacted = BindingError::new(self.redaction.apply(error.message()));
            match error.data() {
                Some(data) => redacted.with_data(data.clone()),
                None => redacted,
            }
        })
    }

    async fn call_unredacted(
        &self,
        name: &str,
        args: BindingArgs,
    ) -> Result<JsonValue, BindingError> {
        let arguments = match &*args {
            JsonValue::Null => None,
            // rmcp writes what it sends with serde, one call per level: within the serde depth.
            JsonValue::Object(_) => match args.to_serde_json() {
                Ok(serde_json::Value::Object(arguments)) => Some(arguments),
                _ => {
                    return Err(BindingError::new(format!(
                        "{}.{name}'s arguments nest more than {} levels deep",
                        self.namespace,
                        json::SERDE_DEPTH
                    )));
                }
            },
            _ => {
                return Err(BindingError::new(format!(
                    "{}.{name} takes an object of arguments (MCP tool arguments are an object)",
                    self.namespace
                )));
            }
        };
        let peer = self.peer().await?;
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        // What the server asks while the call is in flight goes to the client of the run.
        let _relayed = Downstream::current().map(|downstream| self.relay.enter(downstream));
        // Dropping the call at the timeout sends `notifications/cancelled` upstream.
        let answered = tokio::time::timeout(self.server.call_timeout, peer.call_tool(params));
        let Ok(answer) = answered.await else {
            return Err(BindingError::new(format!(
                "upstream server {} did not answer within {} ms",
                json::quote(&self.namespace),
                self.server.call_timeout.as_millis()
            )));
        };
        match answer {
            Ok(result) => resolution(result),
            Err(error) => {
                let server = json::quote(&self.namespace);
                if peer.is_transport_closed() {
                    self.client.lock().await.take();
                    return Err(BindingError::new(format!(
                        "upstream server {server} went away during the call ({error}); it is \
                         started again for the next call"
                    )));
                }
                Err(BindingError::new(format!("upstream server {server} failed the call: {error}")))
            }
        }
    }

    /// The namespace its tools are in, and the prefix of its resources' and prompts' names.
    pub(crate) fn name(&self) -> &str {
        &self.namespace
    }

    /// Whether it offers resources, and prompts.
    pub(crate) fn offers(&self) -> (bool, bool) {
        self.offers
    }

    /// Its resources.
    pub(crate) async fn resources(&self) -> Result<Vec<Resource>, String> {
        self.ask("resources/list", |peer| async move { peer.list_all_resources().await }).await
    }

    /// Its resource templates.
    pub(crate) async fn templates(&self) -> Result<Vec<ResourceTemplate>, String> {
        let list =
            |peer: rmcp::Peer<RoleClient>| async move { peer.list_all_resource_templates().await };
        self.ask("resources/templates/list", list).await
    }

    /// One resource.
    pub(crate) async fn read(
        &self,
        params: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, String> {
        self.ask("resources/read", |peer| async move { peer.read_resource(params).await }).await
    }

    /// Its prompts.
    pub(crate) async fn prompts(&self) -> Result<Vec<Prompt>, String> {
        self.ask("prompts/list", |peer| async move { peer.list_all_prompts().await }).await
    }

    /// One prompt.
    pub(crate) async fn prompt(
        &self,
        params: GetPromptRequestParams,
    ) -> Result<GetPromptResult, String> {
        self.ask("prompts/get", |peer| async move { peer.get_prompt(params).await }).await
    }

    /// One request of `method` to the server, within its `timeoutMs`; an error names the server
    /// and shows none of its secrets.
    async fn ask<T, F>(
        &self,
        method: &str,
        request: impl FnOnce(rmcp::Peer<RoleClient>) -> F,
    ) -> Result<T, String>
    where
        F: std::future::Future<Output = Result<T, rmcp::ServiceError>>,
    {
        let server = json::quote(&self.namespace);
        let peer = self.peer().await.map_err(|error| self.redaction.apply(error.message()))?;
        match tokio::time::timeout(self.server.call_timeout, request(peer)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => Err(self
                .redaction
                .apply(&format!("upstream server {server}: {method} failed: {error}"))),
            Err(_) => Err(format!(
                "upstream server {server} did not answer {method} within {} ms",
                self.server.call_timeout.as_millis()
            )),
        }
    }

    /// The connection's peer, connecting again when the server has gone.
    async fn peer(&self) -> Result<rmcp::Peer<RoleClient>, BindingError> {
        let mut client = self.client.lock().await;
        if let Some(live) = client.as_ref().filter(|live| !live.peer().is_transport_closed()) {
            return Ok(live.peer().clone());
        }
        let connecting = connect(
            &self.namespace,
            &self.server,
            &self.stderr,
            &self.relay,
            self.authorization.as_ref(),
        );
        let reconnected = tokio::time::timeout(connect_within(&self.server), connecting)
            .await
            .map_err(|_| "no answer".to_owned())
            .and_then(|connected| connected);
        match reconnected {
            Ok(live) => {
                let peer = live.peer().clone();
                if let Some(dead) = client.replace(live) {
                    tokio::spawn(async move { drop(dead.cancel().await) });
                }
                Ok(peer)
            }
            Err(why) => Err(BindingError::new(format!(
                "upstream server {} is not running, and restarting it failed: {why}",
                json::quote(&self.namespace)
            ))),
        }
    }

    /// From now on, what the server writes on stderr goes to ours.
    pub(crate) fn forward_stderr(&self) {
        self.stderr.forward.store(true, Ordering::Relaxed);
    }

    /// Ends the connection (a command server is stopped: its stdin closed, then signalled).
    pub(crate) async fn close(&self) {
        if let Some(client) = self.client.lock().await.take() {
            let _ = client.cancel().await;
        }
    }
}

/// The variables of our environment a command server gets besides its config's `env`: where to
/// find programs and its home, the locale, the terminal, temporary and XDG directories,
/// certificate bundles and proxies. Nothing else of ours (the checkpoint key, another server's
/// token, a cloud credential) reaches a server whose config does not name it.
fn inherited() -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
    const NAMES: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "TZ",
        "TMPDIR",
        "LANG",
        "LANGUAGE",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
    ];
    std::env::vars_os().filter(|(name, _)| {
        let name = name.to_string_lossy();
        NAMES.contains(&name.as_ref()) || name.starts_with("LC_")
    })
}

/// How long connecting to `server` may take: with `oauth`, the user may have to authorize first.
fn connect_within(server: &Server) -> Duration {
    match &server.reach {
        Reach::Url { oauth: Some(_), .. } => CONNECT_WITHIN + AUTHORIZE_WITHIN,
        _ => CONNECT_WITHIN,
    }
}

async fn connect(
    namespace: &str,
    server: &Server,
    stderr: &Arc<Stderr>,
    relay: &Arc<Relay>,
    authorization: Option<&Arc<Authorization>>,
) -> Result<Client, String> {
    let handler = RelayHandler(relay.clone());
    match &server.reach {
        Reach::Command { argv, env, cwd } => {
            #[expect(clippy::disallowed_methods, reason = "the configured upstream server")]
            let mut command = tokio::process::Command::new(&argv[0]);
            command
                .args(&argv[1..])
                .env_clear()
                .envs(inherited())
                .envs(env.iter().map(|(k, v)| (k, v)));
            if let Some(cwd) = cwd {
                command.current_dir(cwd);
            }
            let (transport, pipe) = TokioChildProcess::builder(command)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|error| format!("cannot start {}: {error}", json::quote(&argv[0])))?;
            if let Some(pipe) = pipe {
                tokio::spawn(stderr.clone().relay(namespace.to_owned(), pipe));
            }
            handler.serve(transport).await.map_err(|error| format!("initialize failed: {error}"))
        }
        Reach::Url { url, headers, .. } => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(headers.iter().cloned().collect());
            let served = match authorization {
                Some(authorization) => {
                    let client = authorization.client();
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    handler.serve(transport).await
                }
                None => handler.serve(StreamableHttpClientTransport::from_config(config)).await,
            };
            match served {
                Ok(client) => Ok(client),
                Err(error) => Err(format!(
                    "cannot connect to {}: {}{}",
                    origin_of(url),
                    root_cause(&error),
                    unreachable_because(url).await
                )),
            }
        }
    }
}

impl Stderr {
    /// Keeps each line as the last, and passes it on when forwarding, until the pipe closes.
    async fn relay(self: Arc<Self>, namespace: String, pipe: ChildStderr) {
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if self.forward.load(Ordering::Relaxed) {
                crate::tell(&format!("code-runtime: upstream {}: {line}", json::quote(&namespace)));
            }
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = line;
        }
    }

    /// `why`, with the server's last line on stderr when it wrote one.
    fn explained(&self, why: String) -> String {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let last = last.trim();
        if last.is_empty() { why } else { format!("{why} (its last words on stderr: {last})") }
    }
}

/// Why `url` cannot be reached at all (no listener, a certificate nobody trusts, a name that
/// does not resolve), as `" (because ...)"`; empty when it can be. rmcp reports the HTTP
/// client's failure by its outermost message only ("error sending request"), which names
/// none of these; a request of our own (bounded, only after a failed connect) reads the cause.
async fn unreachable_because(url: &str) -> String {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build();
    let Ok(client) = client else { return String::new() };
    let Err(error) = client.head(url).send().await else { return String::new() };
    let mut causes = Vec::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&error);
    while let Some(next) = cause {
        causes.push(next.to_string());
        cause = next.source();
    }
    match causes.last() {
        Some(last) => format!(" (because: {last})"),
        None => String::new(),
    }
}

/// The innermost cause of `error`, without the Rust type names rmcp puts in brackets
/// (`Transport [rmcp::transport::worker::WorkerTransport<...>] error: ...`).
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    let text = cause.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|close| open + close) else { break };
        out.push_str(rest[..open].trim_end());
        if !rest[open..close].contains("::") {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// A `tools/call` result as the program sees it: `structuredContent` when present, else the
/// text content parsed as JSON when it parses, else the text; non-text content as its MCP
/// content blocks. `isError` rejects with the text, and the structured content as data.
fn resolution(result: CallToolResult) -> Result<JsonValue, BindingError> {
    let text = text_of(&result.content);
    if result.is_error == Some(true) {
        let message = text.unwrap_or_else(|| "the upstream tool failed".to_owned());
        let mut error = BindingError::new(message);
        if let Some(data) = result.structured_content {
            error = error.with_data(JsonValue::from(data));
        }
        return Err(error);
    }
    if let Some(value) = result.structured_content {
        return Ok(JsonValue::from(value));
    }
    match text {
        // Any depth parses; a text whose value would hold more than the bound stays text.
        Some(text) => {
            Ok(json::parse_within(&text, MAX_VALUE_BYTES).unwrap_or(JsonValue::String(text)))
        }
        None if result.content.is_empty() => Ok(JsonValue::Null),
        None => json::to_value(&result.content)
            .map_err(|error| BindingError::new(format!("unreadable tool result: {error}"))),
    }
}

/// The content's text, when every block is text (joined by newlines).
fn text_of(content: &[ContentBlock]) -> Option<String> {
    let texts: Option<Vec<&str>> =
        content.iter().map(|block| block.as_text().map(|text| text.text.as_str())).collect();
    texts.filter(|texts| !texts.is_empty()).map(|texts| texts.join("\n"))
}

/// `google_drive` as `GoogleDrive`.
fn pascal(name: &str) -> String {
    name.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Runs `work` on a blocking thread of the runtime that runs the call.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, BindingError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| BindingError::new(format!("recording the call failed: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use code_runtime::json;

    fn result(
        content: Vec<ContentBlock>,
        structured: Option<JsonValue>,
        error: bool,
    ) -> CallToolResult {
        let mut result =
            if error { CallToolResult::error(content) } else { CallToolResult::success(content) };
        result.structured_content = structured.map(|value| value.to_serde_json().unwrap());
        result
    }

    #[test]
    fn results_become_values_or_rejections() {
        let text = |t: &str| ContentBlock::text(t.to_owned());
        assert_eq!(resolution(result(vec![text("{\"a\":1}")], None, false)), Ok(json!({"a": 1})));
        assert_eq!(resolution(result(vec![text("hello")], None, false)), Ok(json!("hello")));
        assert_eq!(
            resolution(result(vec![text("x")], Some(json!({"t": 36})), false)),
            Ok(json!({"t": 36}))
        );
        assert_eq!(resolution(result(vec![], None, false)), Ok(JsonValue::Null));
        // A number no double holds is not parsed into a lossy value: the text stays.
        assert_eq!(
            resolution(result(vec![text("9007199254740993")], None, false)),
            Ok(json!("9007199254740993"))
        );
        let failed = resolution(result(vec![text("not found")], Some(json!({"code": 4})), true));
        let failed = failed.unwrap_err();
        assert_eq!((failed.message(), failed.data()), ("not found", Some(&json!({"code": 4}))));
        let lines = resolution(result(vec![text("a"), text("b")], None, false));
        assert_eq!(lines, Ok(json!("a\nb")));
    }

    #[test]
    fn class_names_are_pascal_case() {
        assert_eq!(pascal("google_drive"), "GoogleDrive");
        assert_eq!(pascal("memory"), "Memory");
        assert_eq!(pascal("_x__y"), "XY");
    }
}

//! `code-runtime mcp`: code mode for any MCP client over any MCP servers (DESIGN.md §12). The
//! upstream servers' tools become binding namespaces, and the client gets `run_code`.

mod admission;
mod approval;
mod authorization;
mod config;
mod expansion;
mod listener;
mod metrics;
mod passthrough;
mod redaction;
mod relay;
mod server;
mod upstream;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use code_runtime::{CodeRuntime, Language};
use code_runtime_fixtures::{BindingsFile, Recorder, load_bindings};
use code_runtime_worker_thread::Isolation;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::Failure;
use crate::mcp::admission::Admission;
use crate::mcp::approval::Fallback;
use crate::mcp::config::McpConfig;
use crate::mcp::listener::{Caps, Listener, Proof};
use crate::mcp::metrics::Metrics;
use crate::mcp::passthrough::Passthrough;
use crate::mcp::server::{ApprovalSetup, Catalogue, CodeModeServer, Runtimes, Serving};
use crate::mcp::upstream::Upstream;

/// `code-runtime mcp`'s options (CLI.md).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// JSON {"servers": {"ns": {"command": [..], "env": {..}} | {"url": "..", "headers": {..}}},
    /// "mcpServers": {as MCP clients write it}, "bindings", "languages", "limits",
    /// "approvalFallback"}: each upstream MCP server's tools become the namespace "ns"; ${VAR}
    /// in env and headers comes from the environment; a server may add "approval": "none" |
    /// "destructive" (the default) | "all" | [names or globs], the tools whose calls the
    /// client's user approves.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (a loopback address such as
    /// 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR", value_parser = address)]
    http: Option<SocketAddr>,
    /// One JSON line per binding call, as for `run`.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// The record file's bound [default: 1073741824]; a full file is renamed FILE.1 (replacing
    /// the one there) and a fresh FILE started.
    #[arg(long, value_name = "N", value_parser = crate::count, allow_hyphen_values = true)]
    record_max_bytes: Option<u64>,
    /// With --http: a request to /mcp or /metrics without `Authorization: Bearer <the file's
    /// token>` is refused 401 (/healthz stays open).
    #[arg(long, value_name = "FILE")]
    auth_token_file: Option<PathBuf>,
    /// At most N runs at once; more wait their turn [default: no cap].
    #[arg(long, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    max_concurrent_runs: Option<usize>,
}

/// `--max-concurrent-runs`' value.
fn positive(text: &str) -> Result<usize, String> {
    text.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("needs a positive integer, got {text}"))
}

/// What `--http` serves beside `/mcp`.
struct Http {
    address: SocketAddr,
    /// `--auth-token-file`'s token.
    token: Option<String>,
}

/// The token of `--auth-token-file`: the file's text without surrounding whitespace.
fn auth_token(path: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read --auth-token-file {}: {error}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Failure::Misuse(format!("--auth-token-file {} is empty", path.display())));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Failure::Misuse(format!(
            "--auth-token-file {}: a token is one word (no spaces or control characters)",
            path.display()
        )));
    }
    Ok(token.to_owned())
}

/// `--http`'s value.
fn address(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| format!("needs an address such as 127.0.0.1:8080, got {text}"))
}

pub(crate) fn main(args: Args) -> Result<ExitCode, Failure> {
    let path = args.config.clone().ok_or("mcp needs --config FILE")?;
    let config = McpConfig::load(&path)?;
    if args.auth_token_file.is_some() && args.http.is_none() {
        return Err(Failure::Misuse(
            "--auth-token-file needs --http ADDR (over stdio the client started the server)".into(),
        ));
    }
    let token = args.auth_token_file.as_deref().map(auth_token).transpose()?;
    let http = args.http.map(|address| Http { address, token });
    // Every run of every client shares the record: a full file is moved aside, never left full.
    let rotation = code_runtime_fixtures::Rotation::Rotate;
    let recorder = crate::run::recorder(args.record.as_deref(), args.record_max_bytes, rotation)?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::Internal(format!("cannot start tokio: {error}")))?;
    let serving = Serving {
        metrics: Metrics::new(),
        admission: Arc::new(Admission::new(args.max_concurrent_runs)),
    };
    tokio.block_on(serve(config, http, recorder, serving))
}

async fn serve(
    config: McpConfig,
    http: Option<Http>,
    recorder: Recorder,
    serving: Serving,
) -> Result<ExitCode, Failure> {
    let mut upstreams = Vec::new();
    let mut file = match &config.bindings {
        Some(path) => load_bindings(path, &recorder)?,
        None => BindingsFile::default(),
    };
    let mut namespaces = Vec::new();
    for (name, server) in &config.servers {
        let connected = Upstream::connect(name, server.clone()).await;
        let (upstream, offer) = match connected {
            Ok(connected) => connected,
            Err(why) => {
                close(&upstreams).await;
                return Err(Failure::Misuse(why));
            }
        };
        namespaces.push(upstream.namespace(&offer, &recorder));
        upstreams.push(upstream);
    }
    namespaces.append(&mut file.namespaces);
    let mut catalogue = Catalogue {
        namespaces,
        values: file.values,
        call_tool: file.call_tool,
        result_bytes: config.result_bytes,
        python_packages: Vec::new(),
    };
    let outcome = async {
        let runtimes = runtimes(&config, &mut catalogue)?;
        // A server that pauses runs signs their checkpoints; any replica with the same key
        // (`$CODE_RUNTIME_CHECKPOINT_KEY`) resumes them.
        let pausing = match config.approval_fallback {
            Fallback::Pause => Some(crate::approvals::checkpoint_key(None)?),
            Fallback::Deny => None,
        };
        let approvals = ApprovalSetup {
            fallback: config.approval_fallback,
            key: pausing,
            record: recorder.clone(),
        };
        // A drain waits for runs up to their wall clock, and for the approvals they wait on.
        let drain_within = Duration::from_millis(config.limits.max_wall_ms) + DRAIN_GRACE;
        let passthrough = Passthrough::new(upstreams.clone());
        let server = CodeModeServer::new(
            catalogue,
            runtimes.clone(),
            approvals,
            serving.clone(),
            passthrough,
        );
        let served = match server {
            Ok(server) => {
                // Serving: what the upstream servers say on stderr is ours to pass on now.
                for upstream in &upstreams {
                    upstream.forward_stderr();
                }
                match http {
                    None => serve_stdio(server).await,
                    Some(http) => serve_http(server, http, serving, drain_within).await,
                }
            }
            Err(why) => Err(Failure::Misuse(why)),
        };
        for (_, runtime) in &runtimes {
            runtime.dispose().await;
        }
        served
    }
    .await;
    close(&upstreams).await;
    if let Some(error) = recorder.write_error() {
        return Err(Failure::Internal(format!("cannot write the record: {error}")));
    }
    outcome.map(|()| ExitCode::SUCCESS)
}

async fn close(upstreams: &[Arc<Upstream>]) {
    for upstream in upstreams {
        upstream.close().await;
    }
}

/// One provider per configured language, warm: a server runs many programs. The packages
/// Python programs can import (its virtual environment's) go into `catalogue`.
fn runtimes(config: &McpConfig, catalogue: &mut Catalogue) -> Result<Runtimes, Failure> {
    // Shrinking results: the output budget stops no run, the shrink target replaces it.
    let limits = match config.result_bytes {
        Some(_) => crate::run::shrinking(config.limits),
        None => config.limits,
    };
    let mut runtimes: Runtimes = Vec::new();
    for language in &config.languages {
        let runtime: Arc<dyn CodeRuntime> = match language {
            Language::Python => {
                let python = crate::run::python_provider(limits, true, &config.python)?;
                catalogue.python_packages = python.packages().to_vec();
                Arc::new(python)
            }
            _ => crate::run::provider(*language, limits, Isolation::Process, true, &config.python)?,
        };
        runtimes.push((*language, runtime));
    }
    Ok(runtimes)
}

/// Serves one client on stdin and stdout until stdin closes or a signal comes.
async fn serve_stdio(server: CodeModeServer) -> Result<(), Failure> {
    let stop = CancellationToken::new();
    let signals = tokio::spawn(crate::run::abort_on_signals(stop.clone()));
    let running = server
        .serve_with_ct(rmcp::transport::stdio(), stop.clone())
        .await
        .map_err(|error| Failure::Internal(format!("the MCP session did not start: {error}")));
    let outcome = match running {
        Ok(running) => running
            .waiting()
            .await
            .map(drop)
            .map_err(|error| Failure::Internal(format!("the MCP session failed: {error}"))),
        Err(error) => Err(error),
    };
    signals.abort();
    outcome
}

/// Whether `ip` is a loopback address in any spelling: `127.0.0.0/8`, `::1`, and IPv4 loopback
/// mapped into IPv6 (`::ffff:127.0.0.1`), which `Ipv6Addr::is_loopback` does not count.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(v6.is_loopback(), |v4| v4.is_loopback()),
    }
}

/// Who may reach the HTTP listener at an address, as the MCP transport spec asks against DNS
/// rebinding; checked on every route (`/mcp`, `/metrics`, `/healthz` alike), before the token.
///
/// On loopback (in any spelling, [`is_loopback`]): a request's `Host` must name loopback
/// (`localhost`, `127.0.0.1`, `::1`, or the address itself), and an `Origin`, when a browser
/// sends one, must be a loopback origin. On any other address (a deliberate public listener,
/// behind a load balancer say) the `Host` is not checked, and a request that carries an `Origin`
/// is refused: MCP clients send none, and no web page is meant to reach the server.
#[derive(Clone, Debug)]
struct Reach {
    /// The hosts a `Host` or `Origin` may name; `None` on a public address.
    loopback_names: Option<Vec<String>>,
}

impl Reach {
    fn of(address: SocketAddr) -> Self {
        let names = is_loopback(address.ip()).then(|| {
            let ip = address.ip().to_string();
            ["localhost", "127.0.0.1", "::1", ip.as_str()].map(str::to_owned).to_vec()
        });
        Self { loopback_names: names }
    }

    /// `Err` with why a request with these headers is refused.
    fn check(&self, headers: &axum::http::HeaderMap) -> Result<(), &'static str> {
        use axum::http::header::{HOST, ORIGIN};
        let origin = headers.get(ORIGIN).map(|value| value.to_str().unwrap_or(""));
        let Some(names) = &self.loopback_names else {
            return match origin {
                None => Ok(()),
                Some(_) => Err("a request from a web page (with an Origin) is not served"),
            };
        };
        let host = headers.get(HOST).and_then(|value| value.to_str().ok());
        let host = host.and_then(|host| host.parse::<axum::http::uri::Authority>().ok());
        if !host.is_some_and(|host| names.iter().any(|name| *name == bare(host.host()))) {
            return Err("the Host header does not name this loopback server");
        }
        let Some(origin) = origin else { return Ok(()) };
        let origin = origin.parse::<axum::http::Uri>().ok();
        let allowed = origin.is_some_and(|origin| {
            matches!(origin.scheme_str(), Some("http" | "https"))
                && matches!(origin.path(), "" | "/")
                && origin.host().is_some_and(|host| names.iter().any(|name| *name == bare(host)))
        });
        if allowed { Ok(()) } else { Err("the Origin is not a loopback origin") }
    }
}

/// `host` without the brackets of an IPv6 literal.
fn bare(host: &str) -> &str {
    host.strip_prefix('[').and_then(|host| host.strip_suffix(']')).unwrap_or(host)
}

/// Answers 403 for a request [`Reach::check`] refuses, and passes on the others (`prove`: the
/// request then proves its connection, [`Proof`]).
async fn reachable(
    reach: Arc<Reach>,
    prove: bool,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match reach.check(request.headers()) {
        Ok(()) => {
            if prove {
                proven(&request);
            }
            next.run(request).await
        }
        Err(why) => (axum::http::StatusCode::FORBIDDEN, format!("code-runtime mcp: {why}\n"))
            .into_response(),
    }
}

/// How long a drain waits past the config's wall clock before it ends the runs left.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// Serves streamable HTTP at `http.address` (`/mcp`, `/healthz`, `/metrics`) until SIGINT, or
/// until SIGTERM has drained the runs in flight. The bound address is told on stderr, so
/// `--http 127.0.0.1:0` is usable.
async fn serve_http(
    server: CodeModeServer,
    http: Http,
    serving: Serving,
    drain_within: Duration,
) -> Result<(), Failure> {
    let stop = CancellationToken::new();
    // The Host and Origin are ours to check, on every route ([`Reach`]): rmcp's own check
    // would cover `/mcp` only.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(server.for_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let metrics = serving.metrics.clone();
    let guarded = axum::Router::new()
        .nest_service("/mcp", service)
        .route("/metrics", axum::routing::get(move || std::future::ready(metrics.render())));
    // Without a token, a request that passed the Host and Origin check proves its connection;
    // with one, only a request that carries it does.
    let proven_when_reached = http.token.is_none();
    let guarded = match http.token {
        Some(token) => guarded.layer(axum::middleware::from_fn(move |request, next| {
            bearer(token.clone(), request, next)
        })),
        None => guarded,
    };
    let admission = serving.admission.clone();
    let reach = Arc::new(Reach::of(http.address));
    let router = guarded
        .route("/healthz", axum::routing::get(move || std::future::ready(health(&admission))))
        .layer(axum::middleware::from_fn(move |request, next| {
            reachable(reach.clone(), proven_when_reached, request, next)
        }));
    let tcp = tokio::net::TcpListener::bind(http.address)
        .await
        .map_err(|error| Failure::Misuse(format!("cannot listen on {}: {error}", http.address)))?;
    let bound = tcp.local_addr().map_err(|error| Failure::Internal(error.to_string()))?;
    let listener = Listener::new(tcp, Caps::of_this_process());
    crate::print_stderr(&format!("code-runtime: serving MCP on http://{bound}/mcp"));
    let signals =
        tokio::spawn(drain_on_signals(stop.clone(), serving.admission.clone(), drain_within));
    let shutdown = stop.clone();
    let router = router.into_make_service_with_connect_info::<Proof>();
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
        .await
        .map_err(|error| Failure::Internal(format!("the HTTP server failed: {error}")));
    signals.abort();
    served
}

/// `GET /healthz`: 200 while serving, 503 once draining (a load balancer stops sending).
fn health(admission: &Admission) -> (axum::http::StatusCode, &'static str) {
    if admission.is_draining() {
        (axum::http::StatusCode::SERVICE_UNAVAILABLE, "draining\n")
    } else {
        (axum::http::StatusCode::OK, "ok\n")
    }
}

/// Passes on a request that carries `Authorization: Bearer <token>`; answers any other 401.
async fn bearer(
    token: String,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match given {
        Some(given) if same(given.trim().as_bytes(), token.as_bytes()) => {
            proven(&request);
            next.run(request).await
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "code-runtime mcp: this server needs Authorization: Bearer <token>\n",
        )
            .into_response(),
    }
}

/// `request` passed the checks: its connection is proven ([`Proof::prove`]).
fn proven(request: &axum::extract::Request) {
    if let Some(axum::extract::ConnectInfo(proof)) =
        request.extensions().get::<axum::extract::ConnectInfo<Proof>>()
    {
        proof.prove();
    }
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ (a token
/// compared byte by byte with an early exit tells an attacker how much of a guess was right).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |differ, (x, y)| differ | (x ^ y)) == 0
}

/// SIGINT stops at once (runs in flight end as `abort`). SIGTERM drains: no new runs, `/healthz`
/// says 503, the runs in flight end as they would (within `within`, else they are aborted),
/// then the server stops; a second signal stops at once.
async fn drain_on_signals(stop: CancellationToken, admission: Arc<Admission>, within: Duration) {
    use tokio::signal::unix::{SignalKind, signal as unix_signal};
    let (Ok(mut interrupt), Ok(mut terminate)) =
        (unix_signal(SignalKind::interrupt()), unix_signal(SignalKind::terminate()))
    else {
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => return stop.cancel(),
        _ = terminate.recv() => {}
    }
    admission.drain();
    crate::print_stderr(&format!(
        "code-runtime: SIGTERM: draining {} run(s) in flight, taking no new ones",
        admission.accepted()
    ));
    tokio::select! {
        () = admission.drained() => {
            // The last results are made but may still be in the sessions' queues: ending the
            // sessions now could drop them. A moment to write them out (they are in memory).
            tokio::select! {
                () = tokio::time::sleep(FLUSH_WITHIN) => {}
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
        () = tokio::time::sleep(within) => {}
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    stop.cancel();
}

/// How long a drain leaves the last results to be written before it ends the sessions.
const FLUSH_WITHIN: Duration = Duration::from_millis(500);

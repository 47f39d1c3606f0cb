//! `code-runtime mcp`: code mode for any MCP client over any MCP servers (DESIGN.md §12). The
//! upstream servers' tools become binding namespaces, and the client gets `run_code`.

mod approval;
mod config;
mod server;
mod upstream;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use code_runtime_fixtures::{BindingsFile, Recorder, load_bindings};
use code_runtime_worker_thread::Isolation;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::Failure;
use crate::mcp::approval::Fallback;
use crate::mcp::config::McpConfig;
use crate::mcp::server::{ApprovalSetup, Catalogue, CodeModeServer, Runtimes};
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
    /// The record file's bound [default: 1073741824].
    #[arg(long, value_name = "N", value_parser = crate::count, allow_hyphen_values = true)]
    record_max_bytes: Option<u64>,
}

/// `--http`'s value.
fn address(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| format!("needs an address such as 127.0.0.1:8080, got {text}"))
}

pub(crate) fn main(args: Args) -> Result<ExitCode, Failure> {
    let path = args.config.clone().ok_or("mcp needs --config FILE")?;
    let config = McpConfig::load(&path)?;
    let recorder = crate::run::recorder(args.record.as_deref(), args.record_max_bytes)?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| Failure::Internal(format!("cannot start tokio: {error}")))?;
    tokio.block_on(serve(config, args.http, recorder))
}

async fn serve(
    config: McpConfig,
    http: Option<SocketAddr>,
    recorder: Recorder,
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
    let catalogue = Catalogue { namespaces, values: file.values, call_tool: file.call_tool };
    let outcome = async {
        let runtimes = runtimes(&config)?;
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
        let server = CodeModeServer::new(catalogue, runtimes.clone(), approvals);
        let served = match server {
            Ok(server) => {
                // Serving: what the upstream servers say on stderr is ours to pass on now.
                for upstream in &upstreams {
                    upstream.forward_stderr();
                }
                match http {
                    None => serve_stdio(server).await,
                    Some(address) => serve_http(server, address).await,
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

/// One provider per configured language, warm: a server runs many programs.
fn runtimes(config: &McpConfig) -> Result<Runtimes, Failure> {
    config
        .languages
        .iter()
        .map(|language| {
            let runtime = crate::run::provider(*language, config.limits, Isolation::Process, true)?;
            Ok((*language, runtime))
        })
        .collect()
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

/// What the HTTP listener at `address` accepts, as the MCP transport spec asks against DNS
/// rebinding.
///
/// On loopback (in any spelling, [`is_loopback`]): a request's `Host` must name loopback
/// (`localhost`, `127.0.0.1`, `::1`, or the address itself), and an `Origin`, when a browser
/// sends one, must be a loopback origin. On any other address (a deliberate public listener,
/// behind a load balancer say) the `Host` is not checked, and a request that carries an `Origin`
/// is refused: MCP clients send none, and no web page is meant to reach the server.
fn http_config(address: SocketAddr) -> StreamableHttpServerConfig {
    let config = StreamableHttpServerConfig::default();
    if !is_loopback(address.ip()) {
        return config.disable_allowed_hosts().enforce_origin_validation();
    }
    let ip = address.ip().to_string();
    let hosts = ["localhost", "127.0.0.1", "::1", ip.as_str()];
    let origins = hosts.iter().flat_map(|host| {
        let host = if host.contains(':') { format!("[{host}]") } else { (*host).to_owned() };
        [format!("http://{host}:*"), format!("https://{host}:*")]
    });
    config.with_allowed_hosts(hosts).with_allowed_origins(origins.collect::<Vec<_>>())
}

/// Serves streamable HTTP at `address` (`/mcp`) until a signal comes. The bound address is
/// told on stderr, so `--http 127.0.0.1:0` is usable.
async fn serve_http(server: CodeModeServer, address: SocketAddr) -> Result<(), Failure> {
    let stop = CancellationToken::new();
    let config = http_config(address).with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| Failure::Misuse(format!("cannot listen on {address}: {error}")))?;
    let bound = listener.local_addr().map_err(|error| Failure::Internal(error.to_string()))?;
    crate::print_stderr(&format!("code-runtime: serving MCP on http://{bound}/mcp"));
    let signals = tokio::spawn(crate::run::abort_on_signals(stop.clone()));
    let shutdown = stop.clone();
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
        .await
        .map_err(|error| Failure::Internal(format!("the HTTP server failed: {error}")));
    signals.abort();
    served
}

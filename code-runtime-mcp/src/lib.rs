//! Code mode for any MCP client over any MCP servers (docs/design.md §12, §16), as a library: the
//! upstream servers' tools become binding namespaces, and the client gets `run_code` (with
//! `search_tools`, `describe_tools`, `resume_run` and the upstream servers' prompts and
//! resources passed through). The `code-runtime mcp` command is one caller; a Rust host embeds
//! the same gateway:
//!
//! 1. [`McpConfig::load`] reads the config (the servers, the bindings, the languages, the
//!    limits, the approval fallback), `${VAR}` expanded once.
//! 2. The host builds one provider per [`McpConfig::provider_specs`] (it chooses where they
//!    start, and their warm substrates are its processes).
//! 3. [`serve`] connects the upstream servers and serves one client over stdio, or many over
//!    streamable HTTP ([`Transport`]), until [`Control`] stops or drains it.

mod approval;
mod authorization;
mod bounded;
mod config;
mod description;
mod expansion;
mod http_service;
mod kept;
mod listener;
mod lookup;
mod metrics;
mod oversized;
mod passthrough;
mod redaction;
mod relay;
mod server;
mod upstream;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use code_runtime::provider::RunGate;
use code_runtime::{CheckpointKey, SpentCheckpoints};
use code_runtime_fixtures::{BindingsFile, Recorder, load_bindings};
use code_runtime_providers::Built;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::approval::Fallback;
pub use crate::config::McpConfig;
pub use crate::description::packages_line;
pub use crate::kept::{
    KEPT_FILES_BYTES, KEPT_FILES_COUNT, KEPT_FOR, KEPT_OVER_BYTES, KeptCheckpoints, KeptFiles,
    KeptInMemory,
};
use crate::metrics::Metrics;
use crate::passthrough::Passthrough;
use crate::server::{ApprovalSetup, Catalogue, CodeModeServer, Runtimes, Serving};
use crate::upstream::Upstream;

/// The environment variable a checkpoint key may come from, in hexadecimal: never expanded
/// into what an upstream server is given (`${CODE_RUNTIME_CHECKPOINT_KEY}` in a config is an
/// error).
pub const CHECKPOINT_KEY_VARIABLE: &str = "CODE_RUNTIME_CHECKPOINT_KEY";

/// Why a gateway could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The host asked for what cannot be: an invalid config, an upstream server that does not
    /// start or answer, an address that cannot be listened on.
    #[error("{0}")]
    Invalid(String),
    /// The gateway failed its part: a session that broke, a record that could not be written.
    #[error("{0}")]
    Failed(String),
}

/// What a gateway serves with besides its config.
#[derive(Default)]
pub struct Options {
    /// Every run's binding calls, one line each (`--record`); [`Recorder::off`] keeps none.
    pub recorder: Recorder,
    /// At most this many runs at once; more wait their turn. `None`: no cap.
    pub max_concurrent_runs: Option<usize>,
    /// The key a paused run's checkpoint is signed with; any replica with the same key resumes
    /// it. Needed when the config's `approvalFallback` is `"pause"`
    /// ([`McpConfig::pauses`]).
    pub checkpoint_key: Option<CheckpointKey>,
    /// Where resumed checkpoints are remembered, so each is resumed once (shared by replicas
    /// that share a key); `None`: this process remembers.
    pub spent_checkpoints: Option<Arc<dyn SpentCheckpoints>>,
    /// Where paused runs' checkpoints too large to travel are kept, and found by their handle
    /// (shared by replicas that share a key: [`KeptFiles`] on their shared volume); `None`: in
    /// this process's memory, at most [`KEPT_IN_MEMORY_BYTES`].
    pub kept_checkpoints: Option<Arc<dyn KeptCheckpoints>>,
}

/// The most a gateway keeps of paused runs' checkpoints in its memory when it is given no
/// store ([`Options::kept_checkpoints`]); the oldest go first.
pub const KEPT_IN_MEMORY_BYTES: usize = 256 << 20;

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("max_concurrent_runs", &self.max_concurrent_runs)
            .field("checkpoint_key", &self.checkpoint_key.is_some())
            .field("spent_checkpoints", &self.spent_checkpoints.is_some())
            .field("kept_checkpoints", &self.kept_checkpoints.is_some())
            .finish_non_exhaustive()
    }
}

/// How the client reaches the gateway.
#[derive(Clone, Debug)]
pub enum Transport {
    /// One client on this process's stdin and stdout, until stdin closes.
    Stdio,
    /// Streamable HTTP at `http://ADDRESS/mcp`, with `/healthz` and `/metrics`; the bound
    /// address is told on stderr (`127.0.0.1:0` is usable).
    Http {
        /// Where to listen.
        address: SocketAddr,
        /// A request to `/mcp` or `/metrics` without `Authorization: Bearer <token>` is refused
        /// 401 (`/healthz` stays open).
        token: Option<String>,
    },
}

/// How a host ends a gateway: [`stop`](Control::stop) at once (runs in flight end as `abort`),
/// or [`drain`](Control::drain) (no new runs, `/healthz` answers 503, the runs in flight end
/// as they would, within their wall clock, then the gateway stops). Clones control one gateway.
#[derive(Clone, Debug, Default)]
pub struct Control {
    stop: CancellationToken,
    drain: CancellationToken,
    /// Where the HTTP transport listens, once it does.
    address: Arc<OnceLock<SocketAddr>>,
}

impl Control {
    /// A control nothing has asked of yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the gateway now.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Drains the gateway (over stdio, where no run is waiting for a client that went away,
    /// the same as [`stop`](Control::stop)).
    pub fn drain(&self) {
        self.drain.cancel();
    }

    /// Where the HTTP transport listens (the port the system chose for port 0), once it
    /// does; `None` before, and over stdio.
    pub fn address(&self) -> Option<SocketAddr> {
        self.address.get().copied()
    }
}

/// How long a drain waits past the config's wall clock before it ends the runs left.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// Serves code mode over `config`'s upstream servers and bindings until `control` ends it (or,
/// over stdio, the client goes): connects each server, then serves. `providers` are the ones
/// [`McpConfig::provider_specs`] named, built by the host, in that order; they are disposed
/// before this returns, and the upstream servers closed.
///
/// # Errors
///
/// [`Error::Invalid`] for a server that does not connect, bindings the runs would not accept,
/// providers that do not match the config, an address that cannot be listened on;
/// [`Error::Failed`] for a session that failed or a record that could not be written.
pub async fn serve(
    config: McpConfig,
    providers: Vec<Built>,
    options: Options,
    transport: Transport,
    control: Control,
) -> Result<(), Error> {
    let runtimes: Runtimes =
        providers.iter().map(|built| (built.runtime.language(), built.runtime.clone())).collect();
    let outcome = serve_with(&config, providers, &options, transport, control).await;
    for (_, runtime) in &runtimes {
        runtime.dispose().await;
    }
    if let Some(error) = options.recorder.write_error() {
        return Err(Error::Failed(format!("cannot write the record: {error}")));
    }
    outcome
}

/// [`serve`], the providers' disposal aside.
async fn serve_with(
    config: &McpConfig,
    providers: Vec<Built>,
    options: &Options,
    transport: Transport,
    control: Control,
) -> Result<(), Error> {
    let recorder = &options.recorder;
    let languages: Vec<_> = providers.iter().map(|built| built.runtime.language()).collect();
    if languages != config.languages {
        return Err(Error::Invalid(format!(
            "the providers are for {languages:?}, the config's languages are {:?}",
            config.languages
        )));
    }
    if config.approval_fallback == Fallback::Pause && options.checkpoint_key.is_none() {
        return Err(Error::Invalid(
            "approvalFallback \"pause\" needs a checkpoint key to sign paused runs".to_owned(),
        ));
    }
    let mut file = match &config.bindings {
        Some(path) => {
            load_bindings(path, recorder).map_err(|error| Error::Invalid(error.to_string()))?
        }
        None => BindingsFile::default(),
    };
    let mut upstreams = Vec::new();
    let mut namespaces = Vec::new();
    for (name, server) in &config.servers {
        match Upstream::connect(name, server.clone()).await {
            Ok((upstream, offer)) => {
                namespaces.push(upstream.namespace(&offer, recorder));
                upstreams.push(upstream);
            }
            Err(why) => {
                close(&upstreams).await;
                return Err(Error::Invalid(why));
            }
        }
    }
    namespaces.append(&mut file.namespaces);
    let python_packages =
        providers.iter().flat_map(|built| built.python_packages.iter().cloned()).collect();
    let catalogue = Catalogue {
        namespaces,
        values: file.values,
        call_tool: file.call_tool,
        result_bytes: config.result_bytes,
        python_packages,
    };
    let runtimes: Runtimes =
        providers.into_iter().map(|built| (built.runtime.language(), built.runtime)).collect();
    let served =
        serve_upstreams(config, catalogue, runtimes, options, &upstreams, transport, control).await;
    close(&upstreams).await;
    served
}

/// Serves the server made of `catalogue` and `runtimes` over `transport`.
async fn serve_upstreams(
    config: &McpConfig,
    catalogue: Catalogue,
    runtimes: Runtimes,
    options: &Options,
    upstreams: &[Arc<Upstream>],
    transport: Transport,
    control: Control,
) -> Result<(), Error> {
    let serving =
        Serving { metrics: Metrics::new(), gate: Arc::new(gate(options.max_concurrent_runs)?) };
    // A server that pauses runs signs their checkpoints; any replica with the same key
    // resumes them.
    let approvals = ApprovalSetup {
        fallback: config.approval_fallback,
        key: options.checkpoint_key.clone().filter(|_| config.approval_fallback == Fallback::Pause),
        spent: options.spent_checkpoints.clone(),
        kept: options
            .kept_checkpoints
            .clone()
            .unwrap_or_else(|| Arc::new(KeptInMemory::new(KEPT_IN_MEMORY_BYTES))),
        record: options.recorder.clone(),
    };
    // A drain waits for runs up to their wall clock, and for the approvals they wait on.
    let drain_within = Duration::from_millis(config.limits.max_wall_ms) + DRAIN_GRACE;
    let passthrough = Passthrough::new(upstreams.to_vec());
    let server = CodeModeServer::new(catalogue, runtimes, approvals, serving.clone(), passthrough)
        .map_err(Error::Invalid)?;
    // Serving: what the upstream servers say on stderr is ours to pass on now.
    for upstream in upstreams {
        upstream.forward_stderr();
    }
    match transport {
        Transport::Stdio => serve_stdio(server, control).await,
        Transport::Http { address, token } => {
            let http = http_service::Http { address, token };
            http_service::serve_http(server, http, serving, drain_within, control).await
        }
    }
}

/// The gate of the gateway's runs: at most `cap` at once (`None`: no cap).
fn gate(cap: Option<usize>) -> Result<RunGate, Error> {
    match cap {
        Some(cap) => RunGate::new(cap).map_err(|error| Error::Invalid(error.to_string())),
        None => Ok(RunGate::unbounded()),
    }
}

async fn close(upstreams: &[Arc<Upstream>]) {
    for upstream in upstreams {
        upstream.close().await;
    }
}

/// Serves one client on stdin and stdout until stdin closes or `control` ends it.
async fn serve_stdio(server: CodeModeServer, control: Control) -> Result<(), Error> {
    let stop = CancellationToken::new();
    let ended = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = control.stop.cancelled() => {}
                () = control.drain.cancelled() => {}
            }
            stop.cancel();
        })
    };
    let running = server
        .serve_with_ct(
            (oversized::BoundedLines::new(tokio::io::stdin()), tokio::io::stdout()),
            stop.clone(),
        )
        .await
        .map_err(|error| Error::Failed(format!("the MCP session did not start: {error}")));
    let outcome = match running {
        Ok(running) => running
            .waiting()
            .await
            .map(drop)
            .map_err(|error| Error::Failed(format!("the MCP session failed: {error}"))),
        Err(error) => Err(error),
    };
    ended.abort();
    outcome
}

/// A line for the person running the gateway (the bound address, a drain, an upstream
/// server's stderr, an authorization to complete in a browser): on stderr, as the MCP stdio
/// transport leaves it free for logs.
#[expect(clippy::print_stderr, reason = "stderr is the gateway's log under every transport")]
pub(crate) fn tell(text: &str) {
    eprintln!("{text}");
}

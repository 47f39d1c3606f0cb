//! Serving over streamable HTTP: `/mcp`, `/healthz`, `/livez` and `/metrics` behind the Host and Origin
//! check ([`Reach`]) and the bearer token, until the host stops or drains the gateway.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use code_runtime::provider::RunGate;

use crate::listener::{Caps, Listener, Proof};
use crate::server::{CodeModeServer, Serving};
use crate::{Control, Error};

/// What `--http` serves beside `/mcp`.
pub(crate) struct Http {
    pub(crate) address: SocketAddr,
    /// `--auth-token-file`'s token.
    pub(crate) token: Option<String>,
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

/// Serves streamable HTTP at `http.address` (`/mcp`, `/healthz`, `/livez`, `/metrics`) until `control`
/// stops it, or has drained the runs in flight. The bound address is told on stderr, so
/// `127.0.0.1:0` is usable.
pub(crate) async fn serve_http(
    server: CodeModeServer,
    http: Http,
    serving: Serving,
    drain_within: Duration,
    control: Control,
) -> Result<(), Error> {
    let stop = control.stop.clone();
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
    let gate = serving.gate.clone();
    let reach = Arc::new(Reach::of(http.address));
    let router = guarded
        .route("/healthz", axum::routing::get(move || std::future::ready(health(&gate))))
        // Alive while it answers, draining or not: a liveness probe on `/healthz` would restart
        // a draining server and lose the runs it is finishing.
        .route("/livez", axum::routing::get(|| std::future::ready("live\n")))
        .layer(axum::middleware::from_fn(move |request, next| {
            reachable(reach.clone(), proven_when_reached, request, next)
        }));
    let tcp = tokio::net::TcpListener::bind(http.address)
        .await
        .map_err(|error| Error::Invalid(format!("cannot listen on {}: {error}", http.address)))?;
    let bound = tcp.local_addr().map_err(|error| Error::Failed(error.to_string()))?;
    let listener = Listener::new(tcp, Caps::of_this_process());
    crate::tell(&format!("code-runtime: serving MCP on http://{bound}/mcp"));
    let _ = control.address.set(bound);
    let drain = tokio::spawn(drain_when_asked(control, serving.gate.clone(), drain_within));
    let shutdown = stop.clone();
    let router = router.into_make_service_with_connect_info::<Proof>();
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
        .await
        .map_err(|error| Error::Failed(format!("the HTTP server failed: {error}")));
    drain.abort();
    served
}

/// `GET /healthz`: 200 while serving, 503 once draining (a load balancer stops sending).
fn health(gate: &RunGate) -> (axum::http::StatusCode, &'static str) {
    if gate.is_closed() {
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

/// Once `control` asks for a drain: no new runs, `/healthz` says 503, the runs in flight end
/// as they would (within `within`, else they are aborted), then the server stops; a stop ends
/// the drain at once.
async fn drain_when_asked(control: Control, gate: Arc<RunGate>, within: Duration) {
    tokio::select! {
        () = control.stop.cancelled() => return,
        () = control.drain.cancelled() => {}
    }
    gate.drain();
    crate::tell(&format!(
        "code-runtime: draining {} run(s) in flight, taking no new ones",
        gate.admitted()
    ));
    tokio::select! {
        () = gate.drained() => {
            // The last results are made but may still be in the sessions' queues: ending the
            // sessions now could drop them. A moment to write them out (they are in memory).
            tokio::select! {
                () = tokio::time::sleep(FLUSH_WITHIN) => {}
                () = control.stop.cancelled() => {}
            }
        }
        () = tokio::time::sleep(within) => {}
        () = control.stop.cancelled() => {}
    }
    control.stop.cancel();
}

/// How long a drain leaves the last results to be written before it ends the sessions.
const FLUSH_WITHIN: Duration = Duration::from_millis(500);

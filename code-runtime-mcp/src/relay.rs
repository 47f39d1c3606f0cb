//! An upstream server asking the client during a call: sampling (`sampling/createMessage`),
//! elicitation (`elicitation/create`) and progress notifications, relayed to the client whose
//! run made the call (docs/design.md §16), so servers that ask their user still can.
//!
//! A run's client ([`Downstream`]) rides along with the run as a task-local: the run's binding
//! calls are polled inside its future, so an upstream call finds the client it serves, and its
//! upstream connection's [`Relay`] knows that client while the call is in flight.
//!
//! MCP does not say which call a server's request or progress belongs to, and one upstream
//! connection serves every client of the gateway. So a request is relayed only while every call
//! in flight on that connection serves the same client session (else the server is refused:
//! asking the wrong person, or showing one client another's progress, is worse than not asking),
//! and progress only while they also share the client's progress token.

// Sampling is deprecated by SEP-2577 in rmcp, and still what clients implement.
#![allow(deprecated, reason = "MCP sampling is what clients implement today")]

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ProgressNotificationParam, ProgressToken, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, RoleServer, ServiceError};

tokio::task_local! {
    static DOWNSTREAM: Downstream;
}

/// The client a run serves: its session (a number of this process's), its peer, and the
/// progress token of its `run_code` (if it gave one).
#[derive(Clone)]
pub(crate) struct Downstream {
    session: u64,
    peer: Peer<RoleServer>,
    progress: Option<ProgressToken>,
}

impl Downstream {
    /// The client of `session` that sent the request of `context`.
    pub(crate) fn of(session: u64, context: &RequestContext<RoleServer>) -> Self {
        let progress = context.meta.get_progress_token();
        Self { session, peer: context.peer.clone(), progress }
    }

    /// Runs `work` (a run) with this client as the one its upstream calls relay to.
    pub(crate) async fn serving<F: Future>(self, work: F) -> F::Output {
        DOWNSTREAM.scope(self, work).await
    }

    /// The client of the run being polled, if any.
    pub(crate) fn current() -> Option<Self> {
        DOWNSTREAM.try_with(Clone::clone).ok()
    }
}

/// One upstream connection's calls in flight, with the clients they serve.
#[derive(Default)]
pub(crate) struct Relay {
    state: Mutex<State>,
    /// The last progress forwarded, with its client token. rmcp hands each notification to the
    /// handler on a task of its own, so two of them can reach us in either order; MCP requires a
    /// token's progress to increase, so one that does not is dropped. Held across the send, so
    /// what is forwarded leaves in the order it was checked.
    forwarded: tokio::sync::Mutex<Option<(ProgressToken, f64)>>,
}

#[derive(Default)]
struct State {
    next: u64,
    calls: Vec<(u64, Downstream)>,
}

/// A call in flight, registered with its relay until dropped.
pub(crate) struct Relayed {
    relay: Arc<Relay>,
    id: u64,
}

impl Relay {
    /// Registers a call that serves `downstream`, until the returned guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>, downstream: Downstream) -> Relayed {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.next += 1;
        let id = state.next;
        state.calls.push((id, downstream));
        Relayed { relay: self.clone(), id }
    }

    /// The client whose user (or model) the server may ask: the one client session every call
    /// in flight serves.
    fn asker(&self) -> Result<Peer<RoleServer>, &'static str> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (_, first) = state.calls.first().ok_or("no call of this server is in flight")?;
        if state.calls.iter().any(|(_, call)| call.session != first.session) {
            return Err(
                "calls of several clients are in flight, and MCP does not say whose this is",
            );
        }
        Ok(first.peer.clone())
    }

    /// Where progress goes: the one client every call in flight serves, under the one progress
    /// token they share.
    fn progress_route(&self) -> Option<(Peer<RoleServer>, ProgressToken)> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (_, first) = state.calls.first()?;
        let token = first.progress.clone()?;
        let shared = state.calls.iter().all(|(_, call)| {
            call.session == first.session && call.progress.as_ref() == Some(&token)
        });
        shared.then(|| (first.peer.clone(), token))
    }
}

/// How long a call stays registered after its answer: the server's last progress notification
/// comes just before the answer, but rmcp hands notifications to the handler on tasks of their
/// own, so one may be handled just after the answer was.
const LINGER: std::time::Duration = std::time::Duration::from_millis(100);

impl Drop for Relayed {
    fn drop(&mut self) {
        let (relay, id) = (self.relay.clone(), self.id);
        let forget = move || {
            let mut state = relay.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.calls.retain(|(call, _)| *call != id);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(async move {
                tokio::time::sleep(LINGER).await;
                forget();
            })),
            Err(_) => forget(),
        }
    }
}

/// The client side of an upstream connection: relays what the server asks to [`Relay`]'s
/// client. It says it can sample and elicit; when no client is there to ask (no call in flight),
/// or the client cannot, the server gets an error saying so.
#[derive(Clone)]
pub(crate) struct RelayHandler(pub(crate) Arc<Relay>);

impl RelayHandler {
    fn asker(&self, what: &str) -> Result<Peer<RoleServer>, ErrorData> {
        self.0.asker().map_err(|why| {
            ErrorData::internal_error(format!("code-runtime mcp cannot {what}: {why}"), None)
        })
    }
}

/// Whether `progress` under `token` may follow what was forwarded `last`: a token's progress
/// only increases (NaN never does).
fn advances(last: Option<&(ProgressToken, f64)>, token: &ProgressToken, progress: f64) -> bool {
    match last {
        Some((last_token, last)) if last_token == token => progress > *last,
        _ => !progress.is_nan(),
    }
}

/// A client's failure, as the error the upstream server gets.
fn refused(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(format!("the client could not answer: {other}"), None),
    }
}

impl ClientHandler for RelayHandler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.sampling = Some(Default::default());
        capabilities.elicitation = Some(Default::default());
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info.client_info =
            rmcp::model::Implementation::new("code-runtime", env!("CARGO_PKG_VERSION"));
        // The version the servers users run speak, and the last in which a server may ask its
        // client during a call (2026-07-28 forbids it, and rmcp's newest default is that).
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.asker("ask the client's model")?.create_message(params).await.map_err(refused)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        // No timeout of ours: the user takes the time they take, and the call's `timeoutMs`
        // bounds the whole call.
        let peer = self.asker("ask its user")?;
        peer.create_elicitation_with_timeout(request, None).await.map_err(refused)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut forwarded = self.0.forwarded.lock().await;
        let Some((peer, token)) = self.0.progress_route() else { return };
        if !advances(forwarded.as_ref(), &token, params.progress) {
            return;
        }
        *forwarded = Some((token.clone(), params.progress));
        let mut params = params;
        params.progress_token = token;
        let _ = peer.notify_progress(params).await;
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{NumberOrString, ProgressToken};

    use super::advances;

    #[test]
    fn a_tokens_progress_only_increases_and_a_new_token_starts_over() {
        let a = ProgressToken(NumberOrString::Number(1));
        let b = ProgressToken(NumberOrString::String("b".into()));
        assert!(advances(None, &a, 3.0));
        assert!(!advances(None, &a, f64::NAN));
        let last = (a.clone(), 3.0);
        assert!(!advances(Some(&last), &a, 1.0));
        assert!(!advances(Some(&last), &a, 3.0));
        assert!(!advances(Some(&last), &a, f64::NAN));
        assert!(advances(Some(&last), &a, 3.5));
        assert!(advances(Some(&last), &b, 1.0));
    }
}

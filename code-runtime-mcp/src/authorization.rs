//! The MCP authorization flow for a remote upstream server (`"oauth"` in its config): OAuth 2.1
//! as the MCP authorization spec describes it, with rmcp's `auth` support doing discovery,
//! registration, PKCE, resource indicators and refresh.
//!
//! Authorization is reactive: a request goes out with the token we hold (none at first), and
//! the server's `401` (no token, or one it no longer takes) or `403 insufficient_scope` starts
//! an authorization, after which the request is sent once more. Concurrent requests that are
//! refused together wait for one authorization ([`Authorization::authorize`]).
//!
//! - The authorization code grant (the default) needs the user: the authorization URL is printed
//!   on stderr (and given to `$BROWSER` when set), and the code comes back to a listener of ours
//!   on the loopback interface ([`callback`]).
//! - The client credentials grant (`"grant": "client_credentials"`) needs no one: a client id
//!   with a secret, or with a private key that signs a JWT assertion.
//!
//! Tokens are kept in a file per server under the user's cache directory, readable by the user
//! alone ([`TokenFile`]), so the next start does not ask again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, ClientCredentialsConfig, WWWAuthenticateParams,
};
use tokio::sync::Mutex;

use self::authorized_client::Authorized;
use self::oauth::Client;
pub(crate) use self::oauth::{OAuth, OAuthEntry};
use self::token_file::TokenFile;

mod authorized_client;
mod callback;
mod oauth;
mod token_file;

/// How long the user has to authorize in their browser.
pub(crate) const AUTHORIZE_WITHIN: Duration = Duration::from_secs(300);

/// How many authorizations one request may start: one for a missing or refused token, one to
/// step up its scopes. A server that still refuses is answered with its refusal, not asked
/// again (the conformance suite's `scope-retry-limit` allows three).
const AUTHORIZATIONS_PER_REQUEST: u32 = 2;

/// The authorization of one upstream server, shared by its connections (a reconnection keeps
/// the token).
pub(crate) struct Authorization {
    namespace: String,
    url: String,
    oauth: OAuth,
    /// Where its tokens are kept; `None` when the user has no cache directory (they are kept
    /// in memory only).
    file: Option<PathBuf>,
    /// The HTTP client each connection clones; its manager (which the requests take their
    /// tokens from) is replaced by each authorization.
    client: AuthClient<reqwest::Client>,
    /// How many authorizations have completed: a request refused under an older generation
    /// sends again at once, as someone has authorized since it was sent.
    generation: AtomicU64,
    /// Held by the one authorization under way.
    flight: Mutex<()>,
}

impl Authorization {
    /// The authorization of the server at `url`, with the tokens kept from an earlier start
    /// when there are some (an unreadable file is set aside: the next authorization writes it).
    pub(crate) async fn new(namespace: &str, url: &str, oauth: OAuth) -> Result<Arc<Self>, String> {
        let file = TokenFile::path(url, &oauth.client);
        let mut manager = manager(url, file.as_deref()).await?;
        if file.is_some() {
            // A token kept from an earlier start; discovering the server's metadata for it
            // may fail (the server is down): the first request then authorizes again.
            if manager.initialize_from_store().await.is_err() {
                manager = self::manager(url, file.as_deref()).await?;
            }
        }
        Ok(Arc::new(Self {
            namespace: namespace.to_owned(),
            url: url.to_owned(),
            oauth,
            file,
            client: AuthClient::new(reqwest::Client::default(), manager),
            generation: AtomicU64::new(0),
            flight: Mutex::new(()),
        }))
    }

    /// The HTTP client of one connection to the server.
    pub(crate) fn client(self: &Arc<Self>) -> Authorized {
        Authorized { inner: self.client.clone(), authorization: self.clone() }
    }

    /// Authorizes again after a request sent under `generation` was refused with `challenge`
    /// (`step_up`: for scopes the token lacks). Only one authorization runs at once; one that
    /// completed while this one waited is taken as this one's.
    async fn authorize(
        &self,
        generation: u64,
        challenge: &str,
        step_up: bool,
    ) -> Result<(), AuthError> {
        let _flight = self.flight.lock().await;
        if self.generation.load(Ordering::Acquire) != generation {
            return Ok(());
        }
        let mut manager =
            manager(&self.url, self.file.as_deref()).await.map_err(AuthError::InternalError)?;
        let metadata = match manager.resolve_metadata_from_challenge(Some(challenge)).await {
            Ok(resolution) => resolution.metadata,
            Err(AuthError::AuthorizationServerMismatch { expected_issuer, .. })
                if same_origin(&expected_issuer, &self.url) =>
            {
                legacy_metadata(&self.url).await?
            }
            Err(error) => return Err(error),
        };
        manager.set_metadata(metadata);
        let scopes = self.scopes(challenge, step_up).await?;
        let manager = match &self.oauth.client {
            Client::SecretCredentials { id, secret } => {
                let config = ClientCredentialsConfig::ClientSecret {
                    client_id: id.clone(),
                    client_secret: secret.0.clone(),
                    scopes,
                    resource: Some(self.url.clone()),
                };
                credentials(manager, config).await?
            }
            Client::KeyCredentials { id, key, algorithm } => {
                let config = ClientCredentialsConfig::PrivateKeyJwt {
                    client_id: id.clone(),
                    signing_key: key.0.as_bytes().to_vec(),
                    signing_algorithm: algorithm.rmcp(),
                    token_endpoint_audience: None,
                    scopes,
                    resource: Some(self.url.clone()),
                };
                credentials(manager, config).await?
            }
            Client::Dynamic { .. } | Client::Registered { .. } => {
                self.code_grant(manager, scopes).await?
            }
        };
        *self.client.auth_manager.lock().await = manager;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The scopes to ask for: at a step up, those the token has and those the challenge
    /// names; else the configured ones (none: the SDK selects from the challenge or metadata).
    async fn scopes(&self, challenge: &str, step_up: bool) -> Result<Vec<String>, AuthError> {
        let mut scopes = self.oauth.scopes.clone();
        if !step_up {
            return Ok(scopes);
        }
        let base = url::Url::parse(&self.url)?;
        let required = WWWAuthenticateParams::parse(challenge, &base).scope.unwrap_or_default();
        let granted = self.client.auth_manager.lock().await.get_current_scopes().await;
        let missing: Vec<&str> = required
            .split_whitespace()
            .filter(|scope| !granted.iter().any(|g| g == scope))
            .collect();
        if missing.is_empty() {
            return Err(AuthError::AuthorizationFailed(format!(
                "the server refuses the token for scope {:?}, which it was granted",
                required
            )));
        }
        for scope in granted.iter().map(String::as_str).chain(missing) {
            if !scopes.iter().any(|known| known == scope) {
                scopes.push(scope.to_owned());
            }
        }
        Ok(scopes)
    }

    /// The authorization code grant: the user authorizes at the URL we print, and the code
    /// comes back to our loopback listener.
    async fn code_grant(
        &self,
        manager: AuthorizationManager,
        scopes: Vec<String>,
    ) -> Result<AuthorizationManager, AuthError> {
        let listener =
            callback::Listener::bind(self.oauth.redirect.as_ref()).await.map_err(|error| {
                AuthError::InternalError(format!(
                    "cannot listen for the authorization's answer: {error}"
                ))
            })?;
        let mut request =
            AuthorizationRequest::new(listener.uri()).with_client_name("code-runtime");
        if !scopes.is_empty() {
            request = request.with_scopes(scopes);
        }
        match &self.oauth.client {
            Client::Registered { id, secret } => {
                request = request.with_preregistered_client(id.clone());
                if let Some(secret) = secret {
                    request = request.with_client_secret(secret.0.clone());
                }
            }
            Client::Dynamic { metadata_url: Some(url) } => {
                request = request.with_client_metadata_url(url.clone());
            }
            _ => {}
        }
        let session =
            AuthorizationSession::new(manager, request).await.map_err(|(_, error)| error)?;
        let url = session.get_authorization_url().to_owned();
        callback::announce(&self.namespace, &url);
        let answer = tokio::time::timeout(AUTHORIZE_WITHIN, listener.answer(&url))
            .await
            .map_err(|_| {
                AuthError::AuthorizationFailed(format!(
                    "not authorized within {} s",
                    AUTHORIZE_WITHIN.as_secs()
                ))
            })?
            .map_err(AuthError::AuthorizationFailed)?;
        session
            .handle_callback_with_issuer(&answer.code, &answer.state, answer.issuer.as_deref())
            .await?;
        Ok(session.auth_manager)
    }
}

/// Whether `issuer` is the origin of `url` (and nothing more).
fn same_origin(issuer: &str, url: &str) -> bool {
    match (url::Url::parse(issuer), url::Url::parse(url)) {
        (Ok(issuer), Ok(url)) => {
            matches!(issuer.path(), "" | "/") && issuer.origin() == url.origin()
        }
        _ => false,
    }
}

/// The authorization server metadata a 2025-03-26 server (no protected resource metadata)
/// serves at its own origin, taken with the issuer it names. RFC 8414 wants the issuer to be
/// that origin, and rmcp refuses one that is not; but the document comes from the MCP server's
/// own origin, which we already trust with the request, so a different issuer in it adds no
/// trust (the conformance suite's `2025-03-26-oauth-metadata-backcompat` serves `/oauth`).
async fn legacy_metadata(url: &str) -> Result<AuthorizationMetadata, AuthError> {
    let mut at = url::Url::parse(url)?;
    at.set_path("/.well-known/oauth-authorization-server");
    at.set_query(None);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()?;
    let response = client.get(at.clone()).send().await?.error_for_status()?;
    let metadata: AuthorizationMetadata = crate::bounded::json(response, MAX_METADATA_BYTES)
        .await
        .map_err(|why| AuthError::MetadataError(format!("{at}: {why}")))?;
    let http = |endpoint: &str| {
        url::Url::parse(endpoint).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
    };
    if !http(&metadata.authorization_endpoint) || !http(&metadata.token_endpoint) {
        return Err(AuthError::MetadataError(format!("{at}: its endpoints are not http(s) URLs")));
    }
    Ok(metadata)
}

/// The largest authorization server metadata document read: a few kilobytes in practice. What
/// a server sends past it is not read (nor held, nor parsed on the threads serving clients).
const MAX_METADATA_BYTES: usize = 1 << 20;

/// A manager for the server at `url`, keeping its tokens in `file`.
async fn manager(url: &str, file: Option<&Path>) -> Result<AuthorizationManager, String> {
    // `new` refuses metadata that points at loopback or private addresses unless the server's
    // own URL is one: a server cannot send us to fetch from the host's network.
    let mut manager = AuthorizationManager::new(url).await.map_err(|error| error.to_string())?;
    if let Some(file) = file {
        manager.set_credential_store(TokenFile { path: file.to_owned(), url: url.to_owned() });
    }
    Ok(manager)
}

/// The client credentials grant: no user, a token for the client itself.
async fn credentials(
    mut manager: AuthorizationManager,
    config: ClientCredentialsConfig,
) -> Result<AuthorizationManager, AuthError> {
    // rmcp 3.11's `private_key_jwt` exchange holds a value that is not `Send` across an await,
    // so it cannot be a task of the multi-threaded runtime: it runs on a blocking thread of its
    // own (awaited here), on the runtime's I/O.
    let runtime = tokio::runtime::Handle::current();
    let exchange = move || {
        runtime.block_on(async move {
            manager.configure_client_credentials(&config)?;
            manager.exchange_client_credentials(&config).await?;
            Ok(manager)
        })
    };
    tokio::task::spawn_blocking(exchange)
        .await
        .map_err(|error| AuthError::InternalError(format!("the token exchange failed: {error}")))?
}

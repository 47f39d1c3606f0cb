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

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use code_runtime::json;
use code_runtime_fixtures::{KeyPath, Text};
use futures::stream::BoxStream;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, ClientCredentialsConfig, CredentialStore, JwtSigningAlgorithm,
    StoredCredentials, WWWAuthenticateParams,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use tokio::sync::Mutex;

use crate::expansion::{Environment, expand};

mod callback;

/// How long the user has to authorize in their browser.
pub(crate) const AUTHORIZE_WITHIN: Duration = Duration::from_secs(300);

/// How many authorizations one request may start: one for a missing or refused token, one to
/// step up its scopes. A server that still refuses is answered with its refusal, not asked
/// again (the conformance suite's `scope-retry-limit` allows three).
const AUTHORIZATIONS_PER_REQUEST: u32 = 2;

/// A remote server's `"oauth"`: how we identify ourselves, and what we ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OAuth {
    pub(crate) client: Client,
    /// `scopes`: asked for at the first authorization; when empty, the server's challenge or
    /// metadata chooses (the MCP spec's scope selection).
    pub(crate) scopes: Vec<String>,
    /// `redirectUri`: the loopback address the code comes back to, for a client registered
    /// with a fixed one; else a free port of 127.0.0.1, path `/callback`.
    pub(crate) redirect: Option<callback::Redirect>,
}

/// Who we are to the authorization server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Client {
    /// Registered at the first authorization (dynamic client registration), or, when the
    /// server takes one, named by the URL of a client metadata document (`clientMetadataUrl`).
    Dynamic { metadata_url: Option<String> },
    /// A client registered beforehand (`clientId`, `clientSecret`), authorizing with the code
    /// grant.
    Registered { id: String, secret: Option<Secret> },
    /// The client credentials grant, authenticated by a secret.
    SecretCredentials { id: String, secret: Secret },
    /// The client credentials grant, authenticated by a JWT signed with a private key
    /// (`privateKeyFile`, PEM; `signingAlgorithm`, ES256 unless said).
    KeyCredentials { id: String, key: Secret, algorithm: Algorithm },
}

/// A value no message or debug output shows.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// The JWT signing algorithms a client credentials key may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Algorithm {
    Es256,
    Es384,
    Rs256,
    Rs384,
    Rs512,
}

const ALGORITHMS: [(&str, Algorithm); 5] = [
    ("ES256", Algorithm::Es256),
    ("ES384", Algorithm::Es384),
    ("RS256", Algorithm::Rs256),
    ("RS384", Algorithm::Rs384),
    ("RS512", Algorithm::Rs512),
];

impl Algorithm {
    fn rmcp(self) -> JwtSigningAlgorithm {
        match self {
            Self::Es256 => JwtSigningAlgorithm::ES256,
            Self::Es384 => JwtSigningAlgorithm::ES384,
            Self::Rs256 => JwtSigningAlgorithm::RS256,
            Self::Rs384 => JwtSigningAlgorithm::RS384,
            Self::Rs512 => JwtSigningAlgorithm::RS512,
        }
    }
}

/// `"oauth"` as a server's config writes it: `true` (register ourselves, ask for what the
/// server says), `false` (none), or an object of [`OAuthFields`].
#[derive(Debug)]
pub(crate) enum OAuthEntry {
    Off,
    On(OAuthFields),
}

/// The keys of an `"oauth"` object, as written (each string expands `${VAR}` when read).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct OAuthFields {
    client_id: Option<Text>,
    client_secret: Option<Text>,
    client_metadata_url: Option<Text>,
    scopes: Option<Scopes>,
    grant: Option<Text>,
    private_key_file: Option<Text>,
    signing_algorithm: Option<Text>,
    redirect_uri: Option<Text>,
}

/// `scopes`: an array of scope names, or one space-separated string.
#[derive(Debug)]
struct Scopes(Vec<String>);

impl<'de> Deserialize<'de> for OAuthEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(OAuthVisitor)
    }
}

/// Reads `"oauth"`: a boolean or an object.
struct OAuthVisitor;

impl<'de> Visitor<'de> for OAuthVisitor {
    type Value = OAuthEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("true, false or an object")
    }

    fn visit_bool<E: de::Error>(self, on: bool) -> Result<OAuthEntry, E> {
        Ok(if on { OAuthEntry::On(OAuthFields::default()) } else { OAuthEntry::Off })
    }

    fn visit_map<A: MapAccess<'de>>(self, fields: A) -> Result<OAuthEntry, A::Error> {
        OAuthFields::deserialize(MapAccessDeserializer::new(fields)).map(OAuthEntry::On)
    }
}

impl<'de> Deserialize<'de> for Scopes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScopesVisitor)
    }
}

/// Reads `scopes`: a string split at whitespace, or an array of single names.
struct ScopesVisitor;

impl<'de> Visitor<'de> for ScopesVisitor {
    type Value = Scopes;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of scope names, or one space-separated string")
    }

    fn visit_str<E: de::Error>(self, scopes: &str) -> Result<Scopes, E> {
        Ok(Scopes(scopes.split_whitespace().map(str::to_owned).collect()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut names: A) -> Result<Scopes, A::Error> {
        let mut scopes = Vec::new();
        while let Some(Text(name)) = names.next_element()? {
            if name.contains(char::is_whitespace) {
                return Err(de::Error::custom("a scope name has no space: give each its own item"));
            }
            scopes.push(name);
        }
        Ok(Scopes(scopes))
    }
}

impl OAuth {
    /// The `"oauth"` of the server at `at` (its key path names it in errors), `None` when
    /// off; `${VAR}` in its strings is taken from `environment`.
    pub(crate) fn from_entry(
        entry: OAuthEntry,
        at: &KeyPath,
        environment: &Environment<'_>,
    ) -> Result<Option<Self>, String> {
        let OAuthEntry::On(fields) = entry else { return Ok(None) };
        let text = |key: &str, value: Option<Text>| -> Result<Option<String>, String> {
            value
                .map(|Text(text)| {
                    expand(&text, environment).map_err(|why| at.key(key).invalid(why))
                })
                .transpose()
        };
        let given = Given {
            id: text("clientId", fields.client_id)?,
            secret: text("clientSecret", fields.client_secret)?.map(Secret),
            key_file: text("privateKeyFile", fields.private_key_file)?,
            algorithm: text("signingAlgorithm", fields.signing_algorithm)?,
            metadata_url: text("clientMetadataUrl", fields.client_metadata_url)?,
            grant: text("grant", fields.grant)?,
        };
        let client = given.client().map_err(|why| at.invalid(why))?;
        let redirect = match text("redirectUri", fields.redirect_uri)? {
            None => None,
            Some(uri) => Some(
                callback::Redirect::parse(&uri)
                    .map_err(|why| at.key("redirectUri").invalid(why))?,
            ),
        };
        let scopes = fields.scopes.map(|Scopes(scopes)| scopes).unwrap_or_default();
        Ok(Some(Self { client, scopes, redirect }))
    }
}

/// Who we are, as `"oauth"`'s keys say it (expanded).
struct Given {
    id: Option<String>,
    secret: Option<Secret>,
    key_file: Option<String>,
    algorithm: Option<String>,
    metadata_url: Option<String>,
    grant: Option<String>,
}

impl Given {
    /// The one client these keys make, or why they make none.
    fn client(self) -> Result<Client, String> {
        let Self { id, secret, key_file, algorithm, metadata_url, grant } = self;
        let algorithm = match algorithm {
            None => None,
            Some(name) => {
                let found = ALGORITHMS.iter().find(|(known, _)| *known == name);
                Some(found.map(|(_, algorithm)| *algorithm).ok_or_else(|| {
                    let known: Vec<&str> = ALGORITHMS.iter().map(|(known, _)| *known).collect();
                    let known = known.join(", ");
                    format!("signingAlgorithm must be one of {known}, got {}", json::quote(&name))
                })?)
            }
        };
        if metadata_url.as_ref().is_some_and(|url| !url.starts_with("https://")) {
            return Err("clientMetadataUrl must be an https:// URL".into());
        }
        match grant.as_deref() {
            None | Some("authorization_code") => {
                if key_file.is_some() || algorithm.is_some() {
                    return Err("privateKeyFile and signingAlgorithm are for \
                                \"grant\": \"client_credentials\""
                        .into());
                }
                match (id, secret) {
                    (Some(id), secret) => Ok(Client::Registered { id, secret }),
                    (None, None) => Ok(Client::Dynamic { metadata_url }),
                    (None, Some(_)) => Err("clientSecret needs clientId".into()),
                }
            }
            Some("client_credentials") => {
                let id = id.ok_or("\"grant\": \"client_credentials\" needs clientId")?;
                match (secret, key_file) {
                    (Some(secret), None) if algorithm.is_none() => {
                        Ok(Client::SecretCredentials { id, secret })
                    }
                    (None, Some(path)) => {
                        let key = std::fs::read_to_string(&path).map_err(|error| {
                            format!("privateKeyFile {}: {error}", json::quote(&path))
                        })?;
                        let algorithm = algorithm.unwrap_or(Algorithm::Es256);
                        Ok(Client::KeyCredentials { id, key: Secret(key), algorithm })
                    }
                    _ => Err("\"grant\": \"client_credentials\" needs exactly one of \
                              clientSecret or privateKeyFile (with signingAlgorithm)"
                        .into()),
                }
            }
            Some(other) => Err(format!(
                "grant must be \"authorization_code\" or \"client_credentials\", got {}",
                json::quote(other)
            )),
        }
    }
}

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

/// The HTTP client of a connection to an authorizing server: rmcp's [`AuthClient`] (the token,
/// refreshed when it expires), which authorizes when the server refuses it and sends again.
#[derive(Clone)]
pub(crate) struct Authorized {
    inner: AuthClient<reqwest::Client>,
    authorization: Arc<Authorization>,
}

impl Authorized {
    /// `send` once, and again after each authorization a refusal starts (at most
    /// [`AUTHORIZATIONS_PER_REQUEST`]). A request the server refused did not act, so sending
    /// it again is safe.
    async fn send<T, F, Fut>(&self, send: F) -> Result<T, StreamableHttpError<reqwest::Error>>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<reqwest::Error>>>,
    {
        let mut authorizations = 0;
        loop {
            let generation = self.authorization.generation.load(Ordering::Acquire);
            let (challenge, step_up) = match send().await {
                Err(StreamableHttpError::AuthRequired(refusal)) => {
                    (refusal.www_authenticate_header, false)
                }
                Err(StreamableHttpError::InsufficientScope(refusal)) => {
                    (refusal.www_authenticate_header, true)
                }
                outcome => return outcome,
            };
            if authorizations == AUTHORIZATIONS_PER_REQUEST {
                return Err(AuthError::AuthorizationFailed(
                    "the server still refuses the token after authorizing again".into(),
                )
                .into());
            }
            authorizations += 1;
            self.authorization.authorize(generation, &challenge, step_up).await?;
        }
    }
}

impl StreamableHttpClient for Authorized {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.send(|| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.send(|| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        // Ending a session is not worth a user's authorization.
        self.inner.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.send(|| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.send(|| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

/// The file that keeps one server's tokens: `code-runtime/oauth/<key>.json` under
/// `$XDG_CACHE_HOME` (else `~/.cache`), in a directory only the user may enter (0700), written
/// whole (a temporary file renamed over it) with mode 0600. It names the server's URL, and is
/// taken only for that URL.
struct TokenFile {
    path: PathBuf,
    url: String,
}

impl TokenFile {
    /// Where the tokens of `client` at `url` are kept; `None` without a cache directory.
    fn path(url: &str, client: &Client) -> Option<PathBuf> {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .filter(|dir| Path::new(dir).is_absolute())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|dir| Path::new(dir).is_absolute())
                    .map(|home| Path::new(&home).join(".cache"))
            })?;
        let who = match client {
            Client::Dynamic { metadata_url } => metadata_url.as_deref().unwrap_or(""),
            Client::Registered { id, .. }
            | Client::SecretCredentials { id, .. }
            | Client::KeyCredentials { id, .. } => id,
        };
        let key = fnv1a(format!("{url}\n{who}").as_bytes());
        Some(cache.join("code-runtime").join("oauth").join(format!("{key:016x}.json")))
    }

    fn failed(&self, what: &str, error: impl std::fmt::Display) -> AuthError {
        AuthError::CredentialStoreError(format!("{what} {}: {error}", self.path.display()))
    }
}

/// FNV-1a, 64 bits: a stable name for a file, not a secret (the file names its URL inside).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[async_trait::async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(self.failed("cannot read", error)),
        };
        let kept: serde_json::Value =
            serde_json::from_slice(&text).map_err(|error| self.failed("cannot parse", error))?;
        if kept.get("url").and_then(serde_json::Value::as_str) != Some(self.url.as_str()) {
            return Ok(None);
        }
        let credentials = kept
            .get("credentials")
            .cloned()
            .map(serde_json::from_value::<StoredCredentials>)
            .transpose()
            .map_err(|error| self.failed("cannot parse", error))?;
        Ok(credentials)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let dir = self.path.parent().expect("a token file is in a directory");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| self.failed("cannot create the directory of", error))?;
        let text = serde_json::to_vec_pretty(
            &serde_json::json!({ "url": self.url, "credentials": credentials }),
        )
        .map_err(|error| self.failed("cannot write", error))?;
        let temporary = self.path.with_extension(format!("{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| file.write_all(&text).and_then(|()| file.sync_all()))
            .and_then(|()| std::fs::rename(&temporary, &self.path));
        written.map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            self.failed("cannot write", error)
        })
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(self.failed("cannot remove", error))
            }
            _ => Ok(()),
        }
    }
}

//! The HTTP client of a connection to an authorizing server ([`Authorized`]): rmcp's streamable
//! HTTP client with the token, which answers a `401` or `403 insufficient_scope` by starting an
//! authorization and sending the request again, a bounded number of times.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::stream::BoxStream;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthClient, AuthError};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use crate::authorization::{AUTHORIZATIONS_PER_REQUEST, Authorization};

/// The HTTP client of a connection to an authorizing server: rmcp's [`AuthClient`] (the token,
/// refreshed when it expires), which authorizes when the server refuses it and sends again.
#[derive(Clone)]
pub(crate) struct Authorized {
    pub(super) inner: AuthClient<reqwest::Client>,
    pub(super) authorization: Arc<Authorization>,
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

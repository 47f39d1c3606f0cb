//! Where the user's authorization comes back: a listener on the loopback interface that takes
//! the one redirect carrying this authorization's `state` (RFC 8252's loopback redirect).
//!
//! It is served by axum on the gateway's guarded [`Listener`](crate::listener::Listener): a
//! connection that sends nothing is closed after its handshake time, and a few at most are open
//! at once. Any other request (another path, another `state`) is answered and ignored, so a
//! stray or forged request on the loopback cannot end the authorization.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use code_runtime::json;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::listener::Caps;

/// The connections served at once: a browser opens a few; a stray or hostile peer gets no more.
const CAPS: Caps = Caps { connections: 32, unproven_per_peer: 16 };

/// How long the answer's page has to reach the browser once the answer is taken.
const FLUSH_WITHIN: Duration = Duration::from_secs(1);

/// A fixed loopback redirect URI (`redirectUri`), for a client registered with one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Redirect {
    /// As written (a registered URI must match exactly).
    uri: String,
    address: SocketAddr,
    path: String,
}

impl Redirect {
    /// `http://127.0.0.1:PORT/path`, `http://[::1]:PORT/path` or `http://localhost:PORT/path`.
    pub(crate) fn parse(uri: &str) -> Result<Self, String> {
        let url = url::Url::parse(uri).map_err(|error| format!("not a URL: {error}"))?;
        let host = match url.host() {
            Some(url::Host::Ipv4(ip)) if ip.is_loopback() => IpAddr::V4(ip),
            Some(url::Host::Ipv6(ip)) if ip.is_loopback() => IpAddr::V6(ip),
            Some(url::Host::Domain("localhost")) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            _ => return Err("must be an http:// URL of 127.0.0.1, [::1] or localhost".into()),
        };
        if url.scheme() != "http" || url.query().is_some() || url.fragment().is_some() {
            return Err("must be an http:// URL with a port and a path, no query".into());
        }
        let port = url.port().ok_or("must name its port")?;
        Ok(Self {
            uri: uri.to_owned(),
            address: SocketAddr::new(host, port),
            path: url.path().to_owned(),
        })
    }
}

/// What the authorization server sent back.
pub(crate) struct Answer {
    pub(crate) code: String,
    pub(crate) state: String,
    /// RFC 9207's `iss`, when the server sends it.
    pub(crate) issuer: Option<String>,
}

/// The loopback listener of one authorization.
pub(crate) struct Listener {
    listener: TcpListener,
    uri: String,
    path: String,
}

impl Listener {
    /// Listens at `redirect`, or at a free port of 127.0.0.1 with path `/callback`.
    pub(crate) async fn bind(redirect: Option<&Redirect>) -> std::io::Result<Self> {
        match redirect {
            Some(redirect) => Ok(Self {
                listener: TcpListener::bind(redirect.address).await?,
                uri: redirect.uri.clone(),
                path: redirect.path.clone(),
            }),
            None => {
                let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
                let port = listener.local_addr()?.port();
                let uri = format!("http://127.0.0.1:{port}/callback");
                Ok(Self { listener, uri, path: "/callback".into() })
            }
        }
    }

    /// The redirect URI to register and send.
    pub(crate) fn uri(&self) -> String {
        self.uri.clone()
    }

    /// Waits for the redirect of the authorization at `authorization_url` (the one whose
    /// `state` it carries). An error answer (`error=access_denied`) ends it with that error.
    pub(crate) async fn answer(self, authorization_url: &str) -> Result<Answer, String> {
        let expected = url::Url::parse(authorization_url)
            .ok()
            .and_then(|url| {
                url.query_pairs().find(|(key, _)| key == "state").map(|(_, v)| v.into_owned())
            })
            .ok_or("the authorization URL has no state")?;
        let (taken, mut answers) = mpsc::channel(1);
        let path = self.path;
        let router = axum::Router::new().fallback(move |method: Method, uri: Uri| {
            // A browser follows the redirect with a GET; nothing else is an answer.
            let (response, answer) = match method {
                Method::GET => respond(&uri, &path, &expected),
                _ => (page(StatusCode::METHOD_NOT_ALLOWED, "Only a GET answers."), None),
            };
            if let Some(answer) = answer {
                // Only the first answer counts; the channel holds it.
                let _ = taken.try_send(answer);
            }
            std::future::ready(response)
        });
        let done = CancellationToken::new();
        let listener = crate::listener::Listener::new(self.listener, CAPS);
        let server =
            axum::serve(listener, router).with_graceful_shutdown(done.clone().cancelled_owned());
        let mut server = std::pin::pin!(server.into_future());
        let answer = tokio::select! {
            _ = server.as_mut() => return Err("the loopback listener ended".to_owned()),
            answer = answers.recv() => answer,
        };
        // The page that says so is on its way to the browser: a moment to send it.
        done.cancel();
        let _ = tokio::time::timeout(FLUSH_WITHIN, server).await;
        answer.unwrap_or_else(|| Err("the loopback listener ended".to_owned()))
    }
}

/// The page for a request to `uri`, and the answer it carries when it is the redirect on `path`
/// with state `expected`.
fn respond(uri: &Uri, path: &str, expected: &str) -> (Response, Option<Result<Answer, String>>) {
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    let get =
        |name: &str| query.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    if uri.path() != path || get("state").as_deref() != Some(expected) {
        let page =
            page(StatusCode::NOT_FOUND, "This is not the answer code-runtime is waiting for.");
        return (page, None);
    }
    if let Some(error) = get("error") {
        let description = get("error_description").map(|d| format!(": {d}")).unwrap_or_default();
        let refused =
            format!("the authorization server answered {}{description}", json::quote(&error));
        let page = page(
            StatusCode::OK,
            "The authorization was refused; code-runtime has stopped waiting for it.",
        );
        return (page, Some(Err(refused)));
    }
    let Some(code) = get("code") else {
        return (page(StatusCode::BAD_REQUEST, "The answer carries no code."), None);
    };
    let page = page(StatusCode::OK, "code-runtime is authorized. You may close this page.");
    (page, Some(Ok(Answer { code, state: expected.to_owned(), issuer: get("iss") })))
}

/// A small page, not kept by the browser, on a connection that closes after it.
fn page(status: StatusCode, text: &str) -> Response {
    let body = format!("<!doctype html><title>code-runtime</title><p>{text}</p>\n");
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::CONNECTION, "close"),
    ];
    (status, headers, body).into_response()
}

/// Tells the user where to authorize: a line on stderr, and the URL given to `$BROWSER` (the
/// usual variable; its first `:`-separated command) when it is set.
pub(crate) fn announce(namespace: &str, url: &str) {
    crate::tell(&format!(
        "code-runtime: upstream server {} needs authorization: open {url}",
        json::quote(namespace)
    ));
    let Some(browser) = std::env::var("BROWSER").ok().filter(|browser| !browser.trim().is_empty())
    else {
        return;
    };
    // `$BROWSER` is a `:`-separated list of commands, `%s` standing for the URL (else it
    // comes last); the first is taken.
    let command = browser.split(':').next().unwrap_or_default();
    let mut words: Vec<String> =
        command.split_whitespace().map(|word| word.replace("%s", url)).collect();
    if !command.contains("%s") {
        words.push(url.to_owned());
    }
    let program = words.remove(0);
    #[expect(clippy::disallowed_methods, reason = "the user's browser, as $BROWSER names it")]
    let spawned = tokio::process::Command::new(&program)
        .args(&words)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(false)
        .spawn();
    match spawned {
        // Reaped when it exits; the authorization does not wait for it.
        Ok(mut child) => drop(tokio::spawn(async move { child.wait().await })),
        Err(error) => crate::tell(&format!(
            "code-runtime: cannot start $BROWSER {}: {error}",
            json::quote(&program)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(uri: &str) -> (StatusCode, Option<Result<String, String>>) {
        let (response, answer) = respond(&uri.parse().unwrap(), "/callback", "s1");
        (response.status(), answer.map(|answer| answer.map(|answer| answer.code)))
    }

    #[test]
    fn only_the_redirect_with_this_state_on_this_path_answers() {
        assert_eq!(answer("/callback?code=c0&state=s1"), (StatusCode::OK, Some(Ok("c0".into()))));
        // Forged or stray: answered, ignored.
        assert_eq!(answer("/callback?code=c0&state=s2"), (StatusCode::NOT_FOUND, None));
        assert_eq!(answer("/elsewhere?code=c0&state=s1"), (StatusCode::NOT_FOUND, None));
        assert_eq!(answer("/callback?code=c0"), (StatusCode::NOT_FOUND, None));
        assert_eq!(answer("/callback?state=s1"), (StatusCode::BAD_REQUEST, None));
        let (status, refused) =
            answer("/callback?error=access_denied&error_description=no&state=s1");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            refused,
            Some(Err("the authorization server answered \"access_denied\": no".into()))
        );
        // Percent-encoding is undone before comparing.
        assert_eq!(
            answer("/callback?code=a%2Bb&state=s%31"),
            (StatusCode::OK, Some(Ok("a+b".into())))
        );
    }
}

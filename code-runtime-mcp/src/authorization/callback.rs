//! Where the user's authorization comes back: a listener on the loopback interface that takes
//! the one redirect carrying this authorization's `state` (RFC 8252's loopback redirect).
//!
//! It speaks just enough HTTP/1.1 for a browser's `GET`: the request head, bounded, then one
//! small page. Any other request (another path, another `state`) is answered and ignored, so a
//! stray or forged request on the loopback cannot end the authorization.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use code_runtime::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The most of a request head read: a redirect's URL carries a code and a state.
const MAX_HEAD: usize = 16 << 10;

/// The most connections served at once (each for at most [`HEAD_WITHIN`]).
const MAX_CONNECTIONS: usize = 32;

/// How long one connection may take to send its request head.
const HEAD_WITHIN: Duration = Duration::from_secs(10);

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
        // Connections are served side by side, so one that never sends its request cannot hold
        // up the browser's.
        let mut serving = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept(), if serving.len() < MAX_CONNECTIONS => {
                    match accepted {
                        Ok((stream, _)) => {
                            serving.spawn(serve(stream, self.path.clone(), expected.clone()));
                        }
                        // Out of descriptors, say: the connections being served free some.
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
                Some(Ok(Some(answer))) = serving.join_next() => return answer,
            }
        }
    }
}

/// Answers one connection; `Some` when it carried the answer with state `expected` on `path`.
async fn serve(
    mut stream: TcpStream,
    path: String,
    expected: String,
) -> Option<Result<Answer, String>> {
    let head = tokio::time::timeout(HEAD_WITHIN, read_head(&mut stream)).await.ok()??;
    let target = head.strip_prefix("GET ")?.split(' ').next()?;
    let url = url::Url::parse(&format!("http://loopback{target}")).ok()?;
    let query: Vec<(String, String)> =
        url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    let get =
        |name: &str| query.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    if url.path() != path || get("state").as_deref() != Some(expected.as_str()) {
        respond(
            &mut stream,
            "404 Not Found",
            "This is not the answer code-runtime is waiting for.",
        )
        .await;
        return None;
    }
    if let Some(error) = get("error") {
        respond(
            &mut stream,
            "200 OK",
            "The authorization was refused; code-runtime has stopped waiting for it.",
        )
        .await;
        let description = get("error_description").map(|d| format!(": {d}")).unwrap_or_default();
        return Some(Err(format!(
            "the authorization server answered {}{description}",
            json::quote(&error)
        )));
    }
    let Some(code) = get("code") else {
        respond(&mut stream, "400 Bad Request", "The answer carries no code.").await;
        return None;
    };
    respond(&mut stream, "200 OK", "code-runtime is authorized. You may close this page.").await;
    Some(Ok(Answer { code, state: expected, issuer: get("iss") }))
}

/// The request head (up to the blank line), or `None` when it is larger than [`MAX_HEAD`] or
/// the connection ends first.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buffer = [0; 2048];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await.ok().filter(|read| *read > 0)?;
        head.extend_from_slice(&buffer[..read]);
        if head.len() > MAX_HEAD {
            return None;
        }
    }
    String::from_utf8(head).ok()
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!("<!doctype html><title>code-runtime</title><p>{text}</p>\n");
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    // The browser may have gone; the answer is taken either way.
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
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

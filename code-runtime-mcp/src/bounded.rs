//! A response's body read within a bound: what a remote server sends is not held past it.

/// `response`'s body as JSON, read chunk by chunk up to `max_bytes`; the rest is never read.
pub(crate) async fn json<T: serde::de::DeserializeOwned>(
    mut response: reqwest::Response,
    max_bytes: usize,
) -> Result<T, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|error| error.to_string())? {
        if body.len() + chunk.len() > max_bytes {
            return Err(format!("its body is longer than {max_bytes} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|error| format!("its body is not JSON: {error}"))
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// Serves one response of `body` on loopback, once; its address.
    async fn serve_once(body: Vec<u8>) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(&body).await;
        });
        address
    }

    #[tokio::test]
    async fn a_body_past_the_bound_is_refused_one_within_is_read() {
        let small = serve_once(br#"{"a": 1}"#.to_vec()).await;
        let response = reqwest::get(format!("http://{small}/")).await.unwrap();
        let value: serde_json::Value = super::json(response, 1024).await.unwrap();
        assert_eq!(value, serde_json::json!({"a": 1}));
        let large = serve_once(vec![b' '; 64 << 10]).await;
        let response = reqwest::get(format!("http://{large}/")).await.unwrap();
        let refused = super::json::<serde_json::Value>(response, 1024).await.unwrap_err();
        assert!(refused.contains("longer than 1024 bytes"), "{refused}");
    }
}

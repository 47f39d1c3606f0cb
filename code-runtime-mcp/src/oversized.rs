//! Requests longer than stdio carries get an error, never silence.
//!
//! rmcp drops an incoming line over its bound (16 MiB) with a log line and nothing to the
//! client, whose request then waits for ever. [`BoundedLines`] reads stdin for rmcp and stands
//! between: a line within [`MAX_LINE_BYTES`] passes whole; a longer one is dropped as it arrives
//! (never held) and, if it carried a top-level `id`, replaced by a small `tools/call` of
//! [`OVERSIZED`] under that id, which the server answers with an error naming the bound
//! ([`refusal`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::ErrorData;
use tokio::io::{AsyncRead, ReadBuf};

/// The longest line passed on: rmcp's own bound, 16 MiB.
pub(crate) const MAX_LINE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The tool name of the request that stands for a dropped one; no tool of ours has a `/`.
pub(crate) const OVERSIZED: &str = "code-runtime/oversized";

/// The longest `id` kept from a dropped line (JSON-RPC ids are numbers or short strings).
const MAX_ID_BYTES: usize = 256;

/// What the server answers a request of `bytes` that was dropped.
pub(crate) fn refusal(bytes: u64) -> ErrorData {
    ErrorData::invalid_request(
        format!(
            "the request was {bytes} bytes, longer than the {MAX_LINE_BYTES} bytes a line of stdio \
             carries here, and was dropped; a paused run's checkpoint too large to send comes \
             back as a {{\"kept\": ...}} handle, which resume_run takes"
        ),
        None,
    )
}

/// stdin as rmcp reads it: see the module's text.
pub(crate) struct BoundedLines<R> {
    inner: R,
    /// The line being read, while within the bound.
    line: Vec<u8>,
    /// The line being dropped: its length so far.
    dropping: Option<u64>,
    /// Where the line's top-level `id` is, as far as read.
    id: IdScan,
    /// What is ready for rmcp, and how much of it it has taken.
    ready: Vec<u8>,
    taken: usize,
}

impl<R> BoundedLines<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            line: Vec::new(),
            dropping: None,
            id: IdScan::default(),
            ready: Vec::new(),
            taken: 0,
        }
    }

    /// Takes in `bytes` read from stdin, making ready what is whole.
    fn take_in(&mut self, bytes: &[u8]) {
        for chunk in bytes.split_inclusive(|byte| *byte == b'\n') {
            let (body, ends) = match chunk.split_last() {
                Some((b'\n', body)) => (body, true),
                _ => (chunk, false),
            };
            self.id.feed(body);
            match &mut self.dropping {
                Some(length) => *length += body.len() as u64,
                // rmcp counts the newline too: a line passes whole if it fits with it.
                None if self.line.len() + body.len() >= MAX_LINE_BYTES => {
                    self.dropping = Some((self.line.len() + body.len()) as u64);
                    self.line = Vec::new();
                }
                None => self.line.extend_from_slice(body),
            }
            if ends {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        let id = std::mem::take(&mut self.id).request_id();
        match self.dropping.take() {
            None => {
                self.ready.append(&mut self.line);
                self.ready.push(b'\n');
            }
            Some(bytes) => {
                // A notification (no id) has nobody to answer, and a response (no method)
                // answers nobody: only a request gets its error.
                let Some(id) = id else { return };
                let stand_in = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{OVERSIZED}","arguments":{{"bytes":{bytes}}}}}}}"#
                );
                self.ready.extend_from_slice(stand_in.as_bytes());
                self.ready.push(b'\n');
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.taken < this.ready.len() {
                let give = (this.ready.len() - this.taken).min(out.remaining());
                out.put_slice(&this.ready[this.taken..this.taken + give]);
                this.taken += give;
                if this.taken == this.ready.len() {
                    this.ready.clear();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut buffer = [0u8; 16 << 10];
            let mut read = ReadBuf::new(&mut buffer);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    // The end: a last line without its newline goes as it is.
                    if this.dropping.is_none() && !this.line.is_empty() {
                        this.ready.append(&mut this.line);
                        continue;
                    }
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Ok(())) => {
                    let filled = read.filled().to_vec();
                    this.take_in(&filled);
                }
                other => return other,
            }
        }
    }
}

/// Finds the value of a JSON object's top-level `"id"` key in text read piece by piece, holding
/// at most [`MAX_ID_BYTES`] of it.
#[derive(Default)]
struct IdScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At the top level, a key is next (after `{` or `,`).
    key_next: bool,
    /// The key being read, while it may still be `id` or `method`.
    key: Option<Vec<u8>>,
    /// The key just read was `id`; its value follows the `:`.
    id_key: bool,
    /// A top-level `method` key was read: the line is a request (or a notification).
    method: bool,
    /// The `id`'s value, while it is read; `found` once complete.
    value: Option<Vec<u8>>,
    found: Option<Vec<u8>>,
    too_long: bool,
}

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.byte(byte);
        }
    }

    fn byte(&mut self, byte: u8) {
        if let Some(value) = &mut self.value {
            let ends = !self.in_string && self.depth == 1 && matches!(byte, b',' | b'}');
            if ends {
                self.found = self.value.take();
            } else if value.len() < MAX_ID_BYTES {
                value.push(byte);
            } else {
                self.too_long = true;
            }
        }
        if self.in_string {
            if let Some(key) = &mut self.key {
                if !self.escaped && byte == b'"' {
                    self.id_key = key == b"id";
                    self.method |= key == b"method";
                    self.key = None;
                } else if key.len() < 6 {
                    key.push(byte);
                } else {
                    self.key = None;
                }
            }
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.key_next {
                    self.key = Some(Vec::new());
                    self.key_next = false;
                }
            }
            b'{' | b'[' => {
                self.depth = self.depth.saturating_add(1);
                self.key_next = self.depth == 1 && byte == b'{';
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if self.depth == 1 && self.id_key => {
                self.id_key = false;
                if self.found.is_none() {
                    self.value = Some(Vec::new());
                }
            }
            b',' if self.depth == 1 => self.key_next = true,
            _ => {}
        }
    }

    /// The `id` of a request (a line with a top-level `method`), as JSON text, if it is a number
    /// or a string.
    fn request_id(self) -> Option<String> {
        let text = self.found.filter(|_| !self.too_long && self.method)?;
        match serde_json::from_slice::<serde_json::Value>(&text).ok()? {
            id @ (serde_json::Value::Number(_) | serde_json::Value::String(_)) => {
                Some(id.to_string())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    fn id_of(text: &str) -> Option<String> {
        let mut scan = IdScan::default();
        // In pieces of three bytes, as reads may cut anywhere.
        for piece in text.as_bytes().chunks(3) {
            scan.feed(piece);
        }
        scan.request_id()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#).as_deref(), Some("7"));
        assert_eq!(
            id_of(r#"{"method":"x","params":{"id":1},"id":"a\"b"}"#).as_deref(),
            Some(r#""a\"b""#)
        );
        let late = r#"{"params":{"id":1,"x":["id",2]},"id" : 12 ,"method":"m"}"#;
        assert_eq!(id_of(late).as_deref(), Some("12"));
        assert_eq!(id_of(r#"{"method":"notify","params":{"id":1}}"#), None);
        assert_eq!(id_of(r#"{"method":"m","id":{"x":1}}"#), None);
        assert_eq!(id_of(r#"{"idx":3,"id":4,"method":"m"}"#).as_deref(), Some("4"));
        // A response (no method) answers nobody; a method inside the result is not the line's.
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#), None);
        assert_eq!(id_of(r#"{"id":3,"result":{"method":"x"}}"#), None);
        assert_eq!(id_of(&format!("{}1{}", "[".repeat(100), "]".repeat(100))), None);
    }

    /// What rmcp takes whole: a line that fits with its newline. One byte more is dropped here,
    /// where rmcp would drop it silently.
    #[tokio::test]
    async fn the_bound_is_rmcps_newline_included() {
        let line = |len: usize| {
            let head = r#"{"method":"m","id":5,"params":""#;
            format!("{head}{}\"}}\n", "p".repeat(len - head.len() - 2))
        };
        for (len, whole) in [(MAX_LINE_BYTES - 1, true), (MAX_LINE_BYTES, false)] {
            let input = line(len);
            assert_eq!(input.len(), len + 1);
            let mut read = BoundedLines::new(input.as_bytes());
            let mut out = String::new();
            read.read_to_string(&mut out).await.unwrap();
            assert_eq!(out == input, whole, "{len}: {}", &out[..out.len().min(120)]);
        }
    }

    #[tokio::test]
    async fn a_line_past_the_bound_becomes_a_small_request_with_its_id() {
        let long = format!(
            "{{\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}},\"jsonrpc\":\"2.0\",\"id\":9}}\n",
            "y".repeat(MAX_LINE_BYTES)
        );
        let notification =
            format!("{{\"method\":\"n\",\"params\":\"{}\"}}\n", "z".repeat(MAX_LINE_BYTES));
        let input = format!("{{\"id\":1}}\n{long}{notification}{{\"id\":2}}");
        let mut read = BoundedLines::new(input.as_bytes());
        let mut out = String::new();
        read.read_to_string(&mut out).await.unwrap();
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines.len(), 3, "{}", &out[..out.len().min(300)]);
        assert_eq!(lines[0], r#"{"id":1}"#);
        let stand_in: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(stand_in["id"], 9);
        assert_eq!(stand_in["params"]["name"], OVERSIZED);
        assert_eq!(stand_in["params"]["arguments"]["bytes"], long.len() - 1);
        assert_eq!(lines[2], r#"{"id":2}"#, "the notification had nobody to answer");
    }
}

//! [`FrameCodec`]: JSON lines on fd 3, with a mandatory maximum line length.
//!
//! Like `tokio_util::codec::LinesCodec`, a decoder without a limit would buffer whatever a peer
//! sends until memory runs out; the peer here is a program, so the limit is not optional. Unlike
//! `LinesCodec`, an over-long line is fatal rather than skipped: fd 3 is a dedicated channel whose
//! honest writer never produces one, so resynchronising would only help a forger. The line being
//! read is also held to what the run may still make the host hold ([`HostMemory`]): a line the
//! run cannot afford ends it before it is read whole.

use bytes::{BufMut, BytesMut};
use code_runtime::provider::HostMemory;
use tokio_util::codec::{Decoder, Encoder};

/// Splits fd-3 traffic into lines (without their `\n`) and writes frames as lines.
#[derive(Debug)]
pub struct FrameCodec {
    max_frame_bytes: usize,
    /// Where to resume the search for `\n`: everything before it has been scanned already, so a
    /// frame arriving in many reads is scanned once, not once per read.
    next_index: usize,
    /// The run's account of host memory, once a run has the cell: the line being read must fit
    /// what is left of it.
    memory: HostMemory,
}

/// Why the frame stream ended abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A line longer than the limit: a protocol violation.
    #[error("frame longer than {limit} bytes")]
    TooLong {
        /// The limit in force.
        limit: usize,
    },
    /// A line longer than the run may make the host hold ([`FrameCodec::charge_to`]).
    #[error("a frame larger than the run's memory budget allows")]
    OverBudget,
    /// The channel closed in the middle of a frame: the child died while writing one, or wrote a
    /// last line without its `\n`.
    #[error("the channel closed in the middle of a frame ({len} bytes)")]
    Truncated {
        /// How much of the frame arrived.
        len: usize,
    },
    /// Reading or writing the channel failed.
    #[error("the frame channel failed: {0}")]
    Io(#[from] std::io::Error),
}

impl FrameCodec {
    /// A codec that refuses lines longer than `max_frame_bytes` (the `\n` not counted).
    pub fn new(max_frame_bytes: usize) -> Self {
        Self { max_frame_bytes, next_index: 0, memory: HostMemory::unlimited() }
    }

    /// From now on, a line must also fit what is left of `memory`, a run's account.
    pub fn charge_to(&mut self, memory: HostMemory) {
        self.memory = memory;
    }
}

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = FrameError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        // A frame of exactly the limit has its `\n` at index `max_frame_bytes`.
        let read_to = buf.len().min(self.max_frame_bytes.saturating_add(1));
        match buf[self.next_index..read_to].iter().position(|&byte| byte == b'\n') {
            Some(offset) => {
                let end = self.next_index + offset;
                self.next_index = 0;
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                Ok(Some(line))
            }
            None if buf.len() > self.max_frame_bytes => {
                Err(FrameError::TooLong { limit: self.max_frame_bytes })
            }
            // What has arrived of the line is held already; the rest would add to it.
            None if buf.len() > self.memory.room() => Err(FrameError::OverBudget),
            None => {
                self.next_index = read_to;
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        match self.decode(buf)? {
            Some(line) => Ok(Some(line)),
            None if buf.is_empty() => Ok(None),
            None => {
                // Unlike `LinesCodec`, an unterminated last line is not a frame: the honest child
                // always ends one, so this is a frame cut short, and the run is told.
                let len = buf.len();
                buf.clear();
                self.next_index = 0;
                Err(FrameError::Truncated { len })
            }
        }
    }
}

impl Encoder<String> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, frame: String, dst: &mut BytesMut) -> Result<(), FrameError> {
        dst.reserve(frame.len() + 1);
        dst.put_slice(frame.as_bytes());
        dst.put_u8(b'\n');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(
        codec: &mut FrameCodec,
        buf: &mut BytesMut,
        bytes: &[u8],
    ) -> Vec<Result<BytesMut, String>> {
        buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            match codec.decode(buf) {
                Ok(Some(line)) => out.push(Ok(line)),
                Ok(None) => break,
                Err(error) => {
                    out.push(Err(error.to_string()));
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn frame_split_across_reads() {
        let mut codec = FrameCodec::new(64);
        let mut buf = BytesMut::new();
        assert!(feed(&mut codec, &mut buf, b"{\"type\":").is_empty());
        assert!(feed(&mut codec, &mut buf, b"\"boot").is_empty());
        let frames = feed(&mut codec, &mut buf, b"-ack\"}\n");
        assert_eq!(frames, vec![Ok(BytesMut::from(&b"{\"type\":\"boot-ack\"}"[..]))]);
        assert!(buf.is_empty());
    }

    #[test]
    fn two_frames_one_read() {
        let mut codec = FrameCodec::new(64);
        let mut buf = BytesMut::new();
        let frames = feed(&mut codec, &mut buf, b"one\ntwo\nthr");
        assert_eq!(frames, vec![Ok(BytesMut::from("one")), Ok(BytesMut::from("two"))]);
        assert_eq!(feed(&mut codec, &mut buf, b"ee\n"), vec![Ok(BytesMut::from("three"))]);
    }

    #[test]
    fn frame_exactly_max_len() {
        let mut codec = FrameCodec::new(8);
        let mut buf = BytesMut::new();
        assert_eq!(feed(&mut codec, &mut buf, b"12345678\n"), vec![Ok(BytesMut::from("12345678"))]);
        // Also when the limit is reached across reads.
        assert!(feed(&mut codec, &mut buf, b"1234").is_empty());
        assert!(feed(&mut codec, &mut buf, b"5678").is_empty());
        assert_eq!(feed(&mut codec, &mut buf, b"\n"), vec![Ok(BytesMut::from("12345678"))]);
    }

    #[test]
    fn frame_one_over_max_len() {
        let mut codec = FrameCodec::new(8);
        let mut buf = BytesMut::new();
        assert_eq!(
            feed(&mut codec, &mut buf, b"123456789\n"),
            vec![Err("frame longer than 8 bytes".to_owned())]
        );
        let mut codec = FrameCodec::new(8);
        let mut buf = BytesMut::new();
        assert!(feed(&mut codec, &mut buf, b"12345678").is_empty());
        assert_eq!(
            feed(&mut codec, &mut buf, b"9"),
            vec![Err("frame longer than 8 bytes".to_owned())]
        );
    }

    #[test]
    fn a_line_over_the_runs_memory_is_refused_before_it_ends() {
        let mut codec = FrameCodec::new(1 << 20);
        codec.charge_to(HostMemory::new(8));
        let mut buf = BytesMut::new();
        assert_eq!(feed(&mut codec, &mut buf, b"12345678\n"), vec![Ok(BytesMut::from("12345678"))]);
        assert_eq!(
            feed(&mut codec, &mut buf, b"123456789"),
            vec![Err("a frame larger than the run's memory budget allows".to_owned())]
        );
    }

    #[test]
    fn empty_lines_are_frames() {
        let mut codec = FrameCodec::new(8);
        let mut buf = BytesMut::new();
        assert_eq!(
            feed(&mut codec, &mut buf, b"\n\n"),
            vec![Ok(BytesMut::new()), Ok(BytesMut::new())]
        );
    }

    #[test]
    fn eof_mid_frame() {
        let mut codec = FrameCodec::new(64);
        let mut buf = BytesMut::from("done\n{\"type\":\"do");
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), Some(BytesMut::from("done")));
        let error = codec.decode_eof(&mut buf).unwrap_err();
        assert!(matches!(error, FrameError::Truncated { len: 11 }), "{error}");
        assert!(buf.is_empty());
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), None, "a clean end after that");
    }

    #[test]
    fn eof_between_frames_is_clean() {
        let mut codec = FrameCodec::new(64);
        let mut buf = BytesMut::from("done\n");
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), Some(BytesMut::from("done")));
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), None);
    }

    #[test]
    fn invalid_utf8_is_passed_on_as_bytes() {
        // The codec splits bytes; the frame layer refuses what is not UTF-8 JSON.
        let mut codec = FrameCodec::new(64);
        let mut buf = BytesMut::new();
        assert_eq!(
            feed(&mut codec, &mut buf, b"\xff\xfe\n"),
            vec![Ok(BytesMut::from(&b"\xff\xfe"[..]))]
        );
        assert_eq!(crate::frame::ChildFrame::parse(b"\xff\xfe"), None);
    }

    #[test]
    fn encoder_terminates_each_frame() {
        let mut codec = FrameCodec::new(64);
        let mut buf = BytesMut::new();
        codec.encode("{\"type\":\"run\"}".to_owned(), &mut buf).unwrap();
        codec.encode("{}".to_owned(), &mut buf).unwrap();
        assert_eq!(&buf[..], b"{\"type\":\"run\"}\n{}\n");
    }
}

//! [`Frames`]: a cell's channel cut into frames, either framing, with a mandatory maximum.
//!
//! A decoder without a limit would buffer whatever a peer sends until memory runs out; the peer
//! here is a program's cell, so the limit is not optional. An over-long frame is fatal rather
//! than skipped: the channel is dedicated and its honest writer never makes one, so
//! resynchronising would only help a forger. The frame being read is also held to what the run
//! may still make the host hold ([`HostMemory`]): a frame the run cannot afford ends it before it
//! is read whole. Nothing is reserved for the length a frame announces (the cell chose it): the
//! buffer grows only as bytes arrive.

use bytes::{Buf, BytesMut};
use code_runtime::provider::HostMemory;
use tokio_util::codec::{Decoder, Encoder};

/// How a channel delimits its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Lines: each frame ends with `\n` (Python's JSON lines). A line never starts with a NUL
    /// byte, which marks a binary frame instead ([`BINARY_MARK`]): the NUL, a 4-byte big-endian
    /// length, and that many bytes, handed on whole (mark and length included).
    Lines,
    /// A 4-byte big-endian length, then that many bytes (V8's cells).
    LengthPrefixed,
}

/// The length prefix of [`Framing::LengthPrefixed`].
pub const LENGTH_BYTES: usize = 4;

/// What starts a binary frame among [`Framing::Lines`].
pub const BINARY_MARK: u8 = 0;

/// Splits a channel into frames (without their delimiter or length).
#[derive(Debug)]
pub struct Frames {
    framing: Framing,
    max_frame_bytes: usize,
    /// Lines: where to resume the search for `\n`. Everything before it has been scanned
    /// already, so a frame arriving in many reads is scanned once, not once per read.
    next_index: usize,
    /// The run's account of host memory, once a run has the cell: the frame being read must fit
    /// what is left of it.
    memory: HostMemory,
}

/// Why the frames of a channel ended abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A frame longer than the limit: a protocol violation.
    #[error("frame longer than {limit} bytes")]
    TooLong {
        /// The limit in force.
        limit: usize,
    },
    /// A frame longer than the run may make the host hold ([`Frames::charge_to`]).
    #[error("a frame larger than the run's memory budget allows")]
    OverBudget,
    /// The channel closed in the middle of a frame: the cell died while writing one, or wrote a
    /// last frame without its end.
    #[error("the channel closed in the middle of a frame ({len} bytes)")]
    Truncated {
        /// How much of the frame arrived.
        len: usize,
    },
    /// Reading the channel failed.
    #[error("the frame channel failed: {0}")]
    Io(#[from] std::io::Error),
}

impl Frames {
    /// A decoder of `framing` that refuses frames longer than `max_frame_bytes` (their delimiter
    /// or length not counted).
    pub fn new(framing: Framing, max_frame_bytes: usize) -> Self {
        Self { framing, max_frame_bytes, next_index: 0, memory: HostMemory::unlimited() }
    }

    /// From now on, frames of up to `max_frame_bytes` are read, if that is more than the limit
    /// (a run whose session state crosses the channel: the run's memory still bounds them).
    pub fn allow_up_to(&mut self, max_frame_bytes: usize) {
        self.max_frame_bytes = self.max_frame_bytes.max(max_frame_bytes);
    }

    /// From now on, a frame must also fit what is left of `memory`, a run's account.
    pub fn charge_to(&mut self, memory: HostMemory) {
        self.memory = memory;
    }

    fn line(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        if self.next_index == 0 && buf.first() == Some(&BINARY_MARK) {
            return self.binary(buf);
        }
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

    /// A binary frame among lines: its mark and length are kept, so the protocol tells it from
    /// a line.
    fn binary(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        let Some(prefix) = buf.get(1..=LENGTH_BYTES) else { return Ok(None) };
        let mut length = [0u8; LENGTH_BYTES];
        length.copy_from_slice(prefix);
        let length = u32::from_be_bytes(length) as usize;
        if length > self.max_frame_bytes {
            return Err(FrameError::TooLong { limit: self.max_frame_bytes });
        }
        let whole = length + 1 + LENGTH_BYTES;
        if whole > self.memory.room() {
            return Err(FrameError::OverBudget);
        }
        if buf.len() < whole {
            return Ok(None);
        }
        Ok(Some(buf.split_to(whole)))
    }

    fn length_prefixed(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        let Some(prefix) = buf.get(..LENGTH_BYTES) else { return Ok(None) };
        let mut length = [0u8; LENGTH_BYTES];
        length.copy_from_slice(prefix);
        let length = u32::from_be_bytes(length) as usize;
        if length > self.max_frame_bytes {
            return Err(FrameError::TooLong { limit: self.max_frame_bytes });
        }
        if length.saturating_add(LENGTH_BYTES) > self.memory.room() {
            return Err(FrameError::OverBudget);
        }
        if buf.len() < LENGTH_BYTES + length {
            return Ok(None);
        }
        buf.advance(LENGTH_BYTES);
        Ok(Some(buf.split_to(length)))
    }
}

impl Decoder for Frames {
    type Item = BytesMut;
    type Error = FrameError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        match self.framing {
            Framing::Lines => self.line(buf),
            Framing::LengthPrefixed => self.length_prefixed(buf),
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        match self.decode(buf)? {
            Some(frame) => Ok(Some(frame)),
            None if buf.is_empty() => Ok(None),
            None => {
                // The honest cell always ends a frame: this one was cut short, and the run is
                // told.
                let len = buf.len();
                buf.clear();
                self.next_index = 0;
                Err(FrameError::Truncated { len })
            }
        }
    }
}

/// Frames the other way: `payload` after its length, or before its `\n`, refused when longer
/// than the limit the reader holds frames to (the host must not send what its cell would refuse,
/// nor a cell what its host would).
impl Encoder<&[u8]> for Frames {
    type Error = FrameError;

    fn encode(&mut self, payload: &[u8], dst: &mut BytesMut) -> Result<(), FrameError> {
        if payload.len() > self.max_frame_bytes {
            return Err(FrameError::TooLong { limit: self.max_frame_bytes });
        }
        match self.framing {
            Framing::Lines => {
                dst.reserve(payload.len() + 1);
                dst.extend_from_slice(payload);
                dst.extend_from_slice(b"\n");
            }
            Framing::LengthPrefixed => {
                dst.reserve(payload.len() + LENGTH_BYTES);
                dst.extend_from_slice(&frame_length(payload.len()).to_be_bytes());
                dst.extend_from_slice(payload);
            }
        }
        Ok(())
    }
}

/// A length in a frame's prefix: at most `u32::MAX`, which no limit of ours comes near.
fn frame_length(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// `payload` as one frame of `framing`, whatever its length ([`Frames`] as an [`Encoder`] without
/// a limit).
pub fn frame(framing: Framing, payload: &[u8]) -> Vec<u8> {
    // The payload is copied once, into a buffer of the frame's size, which becomes the `Vec`
    // without another copy.
    let mut frame = BytesMut::with_capacity(payload.len() + LENGTH_BYTES);
    // Without a limit, nothing is refused.
    let _ = Frames::new(framing, usize::MAX).encode(payload, &mut frame);
    Vec::from(frame)
}

/// One frame of `framing` whose payload, text (JSON), `write` appends in place: a large payload
/// (an answer, a program) is written once, never copied into its frame.
pub fn text_frame(framing: Framing, write: impl FnOnce(&mut String)) -> Vec<u8> {
    let mut text = String::with_capacity(64);
    match framing {
        Framing::Lines => {
            write(&mut text);
            text.push('\n');
            text.into_bytes()
        }
        Framing::LengthPrefixed => {
            // Room for the length, filled in once the payload is written.
            text.push_str("\0\0\0\0");
            write(&mut text);
            let mut bytes = text.into_bytes();
            let length = frame_length(bytes.len() - LENGTH_BYTES);
            bytes[..LENGTH_BYTES].copy_from_slice(&length.to_be_bytes());
            bytes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(codec: &mut Frames, buf: &mut BytesMut, bytes: &[u8]) -> Vec<Result<BytesMut, String>> {
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
    fn a_binary_frame_among_lines_is_read_by_its_length() {
        let mut codec = lines(16);
        let mut buf = BytesMut::new();
        let mut binary = vec![BINARY_MARK, 0, 0, 0, 3, b'\n', 0, 7];
        binary.extend_from_slice(b"next\n");
        let frames = feed(&mut codec, &mut buf, &binary);
        assert_eq!(
            frames,
            vec![
                Ok(BytesMut::from(&[BINARY_MARK, 0, 0, 0, 3, b'\n', 0, 7][..])),
                Ok(BytesMut::from("next"))
            ]
        );
        let too_long = [BINARY_MARK, 0, 0, 0, 17];
        let refused = feed(&mut lines(16), &mut BytesMut::new(), &too_long);
        assert_eq!(refused, vec![Err("frame longer than 16 bytes".to_owned())]);
    }

    fn lines(max: usize) -> Frames {
        Frames::new(Framing::Lines, max)
    }

    #[test]
    fn a_line_split_across_reads() {
        let mut codec = lines(64);
        let mut buf = BytesMut::new();
        assert!(feed(&mut codec, &mut buf, b"{\"type\":").is_empty());
        assert!(feed(&mut codec, &mut buf, b"\"boot").is_empty());
        let frames = feed(&mut codec, &mut buf, b"-ack\"}\n");
        assert_eq!(frames, vec![Ok(BytesMut::from(&b"{\"type\":\"boot-ack\"}"[..]))]);
        assert!(buf.is_empty());
    }

    #[test]
    fn two_lines_one_read() {
        let mut codec = lines(64);
        let mut buf = BytesMut::new();
        let frames = feed(&mut codec, &mut buf, b"one\ntwo\nthr");
        assert_eq!(frames, vec![Ok(BytesMut::from("one")), Ok(BytesMut::from("two"))]);
        assert_eq!(feed(&mut codec, &mut buf, b"ee\n"), vec![Ok(BytesMut::from("three"))]);
    }

    #[test]
    fn a_line_of_exactly_the_limit() {
        let mut codec = lines(8);
        let mut buf = BytesMut::new();
        assert_eq!(feed(&mut codec, &mut buf, b"12345678\n"), vec![Ok(BytesMut::from("12345678"))]);
        // Also when the limit is reached across reads.
        assert!(feed(&mut codec, &mut buf, b"1234").is_empty());
        assert!(feed(&mut codec, &mut buf, b"5678").is_empty());
        assert_eq!(feed(&mut codec, &mut buf, b"\n"), vec![Ok(BytesMut::from("12345678"))]);
    }

    #[test]
    fn a_frame_one_over_the_limit_in_either_framing() {
        let too_long = vec![Err("frame longer than 8 bytes".to_owned())];
        let mut buf = BytesMut::new();
        assert_eq!(feed(&mut lines(8), &mut buf, b"123456789\n"), too_long);
        let mut codec = lines(8);
        let mut buf = BytesMut::new();
        assert!(feed(&mut codec, &mut buf, b"12345678").is_empty());
        assert_eq!(feed(&mut codec, &mut buf, b"9"), too_long);
        // A length prefix is refused before any of the frame arrives.
        let mut codec = Frames::new(Framing::LengthPrefixed, 8);
        let mut buf = BytesMut::new();
        assert_eq!(feed(&mut codec, &mut buf, &9u32.to_be_bytes()), too_long);
    }

    #[test]
    fn a_frame_over_the_runs_memory_is_refused_before_it_ends() {
        let over = vec![Err("a frame larger than the run's memory budget allows".to_owned())];
        let mut codec = lines(1 << 20);
        codec.charge_to(HostMemory::new(8));
        let mut buf = BytesMut::new();
        assert_eq!(feed(&mut codec, &mut buf, b"12345678\n"), vec![Ok(BytesMut::from("12345678"))]);
        assert_eq!(feed(&mut codec, &mut buf, b"123456789"), over);
        let mut codec = Frames::new(Framing::LengthPrefixed, 1 << 20);
        codec.charge_to(HostMemory::new(8));
        let mut buf = BytesMut::new();
        assert_eq!(feed(&mut codec, &mut buf, &5u32.to_be_bytes()), over);
    }

    #[test]
    fn length_prefixed_frames_arrive_whole_and_in_order() {
        let mut codec = Frames::new(Framing::LengthPrefixed, 64);
        let mut buf = BytesMut::new();
        let mut bytes = frame(Framing::LengthPrefixed, b"one");
        bytes.extend(frame(Framing::LengthPrefixed, b""));
        bytes.extend(frame(Framing::LengthPrefixed, b"three"));
        let (first, rest) = bytes.split_at(5);
        assert!(feed(&mut codec, &mut buf, first).is_empty());
        assert_eq!(
            feed(&mut codec, &mut buf, rest),
            vec![Ok(BytesMut::from("one")), Ok(BytesMut::new()), Ok(BytesMut::from("three"))]
        );
    }

    #[test]
    fn the_encoder_refuses_what_the_decoder_would() {
        for framing in [Framing::Lines, Framing::LengthPrefixed] {
            let mut codec = Frames::new(framing, 4);
            let mut buf = BytesMut::new();
            codec.encode(b"four", &mut buf).unwrap();
            assert!(matches!(
                codec.encode(b"fives", &mut buf),
                Err(FrameError::TooLong { limit: 4 })
            ));
            let decoded = codec.decode(&mut buf).unwrap().unwrap();
            assert_eq!(&decoded[..], b"four", "{framing:?}");
            assert!(buf.is_empty(), "{framing:?}");
        }
    }

    #[test]
    fn empty_lines_are_frames() {
        let mut buf = BytesMut::new();
        assert_eq!(
            feed(&mut lines(8), &mut buf, b"\n\n"),
            vec![Ok(BytesMut::new()), Ok(BytesMut::new())]
        );
    }

    #[test]
    fn an_end_in_the_middle_of_a_frame_is_truncation_in_either_framing() {
        let mut codec = lines(64);
        let mut buf = BytesMut::from("done\n{\"type\":\"do");
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), Some(BytesMut::from("done")));
        let error = codec.decode_eof(&mut buf).unwrap_err();
        assert!(matches!(error, FrameError::Truncated { len: 11 }), "{error}");
        assert!(buf.is_empty());
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), None, "a clean end after that");
        let mut codec = Frames::new(Framing::LengthPrefixed, 64);
        let mut buf = BytesMut::from(&frame(Framing::LengthPrefixed, b"cut")[..5]);
        let error = codec.decode_eof(&mut buf).unwrap_err();
        assert!(matches!(error, FrameError::Truncated { len: 5 }), "{error}");
    }

    #[test]
    fn an_end_between_frames_is_clean() {
        let mut codec = lines(64);
        let mut buf = BytesMut::from("done\n");
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), Some(BytesMut::from("done")));
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), None);
    }

    #[test]
    fn invalid_utf8_is_passed_on_as_bytes() {
        // The decoder splits bytes; the protocol refuses what is not UTF-8 JSON.
        let mut buf = BytesMut::new();
        assert_eq!(
            feed(&mut lines(64), &mut buf, b"\xff\xfe\n"),
            vec![Ok(BytesMut::from(&b"\xff\xfe"[..]))]
        );
    }

    #[test]
    fn frames_are_delimited_as_their_framing_says() {
        assert_eq!(frame(Framing::Lines, b"{}"), b"{}\n");
        assert_eq!(frame(Framing::LengthPrefixed, b"{}"), b"\0\0\0\x02{}");
        for framing in [Framing::Lines, Framing::LengthPrefixed] {
            let written = text_frame(framing, |text| text.push_str("{\"a\":1}"));
            assert_eq!(written, frame(framing, b"{\"a\":1}"), "{framing:?}");
        }
    }
}

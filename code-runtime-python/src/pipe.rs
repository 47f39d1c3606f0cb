//! [`PipeLines`]: the child's raw stdout or stderr, read as lines. What a program writes to fd 1
//! or 2 directly (`os.write(1, ...)`, a C extension's `printf`) is output too.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::unix::pipe::Receiver;

/// How many reads one poll makes before yielding, so a child that floods its pipe cannot keep
/// the host loop from its other branches (the budgets among them).
const READS_PER_POLL: usize = 16;

/// Lines of one captured pipe.
pub(crate) struct PipeLines {
    pipe: Option<Receiver>,
    partial: Vec<u8>,
    lines: VecDeque<String>,
    /// A line longer than this is passed on unfinished: it already exceeds any output budget.
    cap: usize,
}

impl PipeLines {
    /// Reads `fd` (a pipe; registered with the reactor) in lines of at most `cap` bytes.
    pub(crate) fn new(fd: Option<OwnedFd>, cap: usize) -> Self {
        let pipe = fd.and_then(|fd| {
            code_runtime::provider::reactor::enter(|| Receiver::from_owned_fd(fd)).ok()
        });
        Self { pipe, partial: Vec::new(), lines: VecDeque::new(), cap }
    }

    /// The next complete line; `Ready(None)` once the pipe is closed and every line taken.
    pub(crate) fn poll_line(&mut self, cx: &mut Context<'_>) -> Poll<Option<String>> {
        let mut buffer = [0u8; 8192];
        for _ in 0..READS_PER_POLL {
            if let Some(line) = self.lines.pop_front() {
                return Poll::Ready(Some(line));
            }
            let Some(pipe) = &mut self.pipe else { return Poll::Ready(None) };
            let mut read = ReadBuf::new(&mut buffer);
            match Pin::new(pipe).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if !read.filled().is_empty() => self.split(read.filled()),
                // End of file, or a read error: either way nothing more comes.
                Poll::Ready(_) => {
                    self.pipe = None;
                    if !self.partial.is_empty() {
                        self.finish_line();
                    }
                }
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Every line still to come, until end of file or `within` (what could hold the pipe open is
    /// dead when this is called; the bound only guards the host).
    pub(crate) async fn drain(&mut self, within: Duration) -> Vec<String> {
        let mut lines = Vec::new();
        let rest = std::future::poll_fn(|cx| {
            loop {
                match self.poll_line(cx) {
                    Poll::Ready(Some(line)) => lines.push(line),
                    Poll::Ready(None) => return Poll::Ready(()),
                    Poll::Pending => return Poll::Pending,
                }
            }
        });
        let _ = code_runtime::provider::reactor::enter(|| tokio::time::timeout(within, rest)).await;
        lines
    }

    /// Every line the pipe holds now, the last one even unfinished, without waiting for more:
    /// for a run that has settled, whose processes may still be dying.
    pub(crate) fn ready(&mut self) -> Vec<String> {
        let mut buffer = [0u8; 8192];
        while let Some(pipe) = &self.pipe {
            // A read of our own, not `try_read`: that answers from the reactor's readiness,
            // which has not yet seen what arrived since the last poll.
            // SAFETY: reads into `buffer`, of its length, from a descriptor `pipe` owns (in
            // non-blocking mode: the receiver set it).
            let read =
                unsafe { libc::read(pipe.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
            if read > 0 {
                self.split(&buffer[..read.unsigned_abs()]);
                continue;
            }
            if read < 0 {
                match std::io::Error::last_os_error().kind() {
                    // Empty for now: what is there has been taken.
                    std::io::ErrorKind::WouldBlock => break,
                    std::io::ErrorKind::Interrupted => continue,
                    _ => {}
                }
            }
            // End of file, or a read error: nothing more comes.
            self.pipe = None;
        }
        if !self.partial.is_empty() {
            self.finish_line();
        }
        self.lines.drain(..).collect()
    }

    fn split(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                self.finish_line();
            } else {
                self.partial.push(byte);
                if self.partial.len() > self.cap {
                    self.finish_line();
                }
            }
        }
    }

    fn finish_line(&mut self) {
        let line = std::mem::take(&mut self.partial);
        self.lines.push_back(String::from_utf8_lossy(&line).into_owned());
    }
}

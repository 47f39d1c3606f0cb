//! What a cell's program is given, its four descriptors ([`CellIo`], made with [`pipe`] and the
//! channel's socket), and what the host learns as it ends ([`CellExit`]).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

/// The descriptors a cell's program gets as 0, 1, 2 and 3.
#[derive(Debug)]
pub struct CellIo {
    /// The program's standard input.
    pub stdin: OwnedFd,
    /// Its standard output.
    pub stdout: OwnedFd,
    /// Its standard error.
    pub stderr: OwnedFd,
    /// Its descriptor 3: the channel to the host.
    pub channel: OwnedFd,
}

/// A pipe for a cell's standard streams: both ends close-on-exec (the cell gets its own copy of
/// the end it keeps), and non-blocking when asked (a cell then loses what it writes to a full
/// pipe rather than waiting for a host that reads it only once the cell is gone).
///
/// # Errors
///
/// What `pipe2` reports (out of descriptors).
pub fn pipe(nonblocking: bool) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    let flags = libc::O_CLOEXEC | if nonblocking { libc::O_NONBLOCK } else { 0 };
    // SAFETY: pipe2 writes two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// How a cell ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellExit {
    /// The program ended: its exit code, or `128 + signal` when a signal killed it.
    Exited(i32),
    /// The cell's init was killed by a signal (the host's [`Cell::kill`](crate::Cell::kill), or the kernel).
    Killed(i32),
}

impl CellExit {
    /// The program's status: its exit code, or `128 + signal`; `None` when the init was killed.
    pub fn status(self) -> Option<i32> {
        match self {
            CellExit::Exited(code) => Some(code),
            CellExit::Killed(_) => None,
        }
    }

    /// Whether the kernel's CPU limit (`RLIMIT_CPU`) ended the program: `SIGXCPU`, or the
    /// `SIGKILL` that follows it, when the cell had used (within 100 ms) its `budget` of CPU
    /// time.
    pub fn by_cpu_limit(self, cpu_used: Duration, budget: Duration) -> bool {
        let status = self.status();
        status == Some(128 + libc::SIGXCPU)
            || (status == Some(128 + libc::SIGKILL)
                && cpu_used + Duration::from_millis(100) >= budget)
    }
}

//! [`launch`]: a cell started for a run (or ahead of one), its channel connected, its first frame
//! sent: a [`Launched`] cell that waits for a run.

use std::io::Write as _;
use std::os::fd::OwnedFd;

use code_runtime::provider::{Ending, reactor};
use std::sync::Arc;

use code_runtime_sandbox::{CellIo, CellLimits, CellPlan, WatchedCell, Zygote};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::codec::FramedRead;

use crate::frames::{Frames, Framing};

/// Where one of a cell's standard streams goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// `/dev/null`.
    Null,
    /// A pipe the host reads. A non-blocking one makes a cell that writes more than the pipe
    /// holds lose the rest instead of waiting for a host that reads only once the cell is gone.
    Pipe {
        /// Whether the cell's end does not block.
        nonblocking: bool,
    },
}

/// Where a cell comes from.
#[derive(Clone, Copy, Debug)]
pub enum Origin<'a> {
    /// Started from scratch, from its plan.
    Plan(&'a CellPlan),
    /// Forked from a zygote of its plan.
    Zygote(&'a Arc<Zygote>),
}

/// How to start one kind of cell.
#[derive(Debug)]
pub struct Launch<'a> {
    /// Where the cell comes from.
    pub origin: Origin<'a>,
    /// Its limits.
    pub limits: CellLimits,
    /// Its standard output and error.
    pub stdout: Stream,
    /// Its standard error.
    pub stderr: Stream,
    /// What the host writes first, before the channel is made non-blocking: a few bytes (or a
    /// few tens of kilobytes) into an empty socket buffer, so the write does not wait on the cell.
    pub first: &'a [u8],
    /// How the channel delimits frames.
    pub framing: Framing,
    /// The longest frame the cell may send.
    pub max_frame_bytes: usize,
    /// What the cell runs, for messages (`python`, `the V8 cell`).
    pub what: &'static str,
}

/// A started cell whose first frame is sent, waiting for a run: everything a run needs before it
/// knows its program. Used by one run at most.
#[derive(Debug)]
pub struct Launched {
    pub(crate) process: WatchedCell,
    pub(crate) frames: FramedRead<OwnedReadHalf, Frames>,
    pub(crate) writer: OwnedWriteHalf,
    /// The read ends of the cell's standard output and error, when they are pipes.
    pub(crate) stdout: Option<OwnedFd>,
    pub(crate) stderr: Option<OwnedFd>,
    /// What the cell was started with (its rlimits, the size of its `/tmp`).
    limits: CellLimits,
}

/// Starts a cell of `launch`, watches it on the reactor and sends its first frame.
///
/// # Errors
///
/// The ending of a run that could not have its cell: why, in a [`Ending::Failed`].
pub async fn launch(launch: Launch<'_>) -> Result<Launched, Ending> {
    let what = launch.what;
    let failed = |doing: &str, error: &dyn std::fmt::Display| {
        Ending::Failed(format!("cannot {doing} {what}: {error}"))
    };
    let Channel { host_end, io, stdout, stderr } =
        channel(launch.stdout, launch.stderr).map_err(|e| failed("prepare", &e))?;
    // The cell holds the other ends now: an end of file on any of them means it is gone.
    let running = match launch.origin {
        Origin::Plan(plan) => plan.start(io, launch.limits).await,
        Origin::Zygote(zygote) => zygote.fork(io, launch.limits).await,
    };
    let running = running.map_err(|e| failed("start", &e))?;
    let mut process =
        reactor::enter(|| WatchedCell::new(running)).map_err(|e| failed("watch", &e))?;
    let connected = (&host_end)
        .write_all(launch.first)
        .and_then(|()| host_end.set_nonblocking(true))
        .and_then(|()| reactor::enter(|| tokio::net::UnixStream::from_std(host_end)));
    let stream = match connected {
        Ok(stream) => stream,
        Err(error) => {
            process.kill();
            return Err(failed("reach", &error));
        }
    };
    let (reader, writer) = stream.into_split();
    let frames = FramedRead::new(reader, Frames::new(launch.framing, launch.max_frame_bytes));
    Ok(Launched { process, frames, writer, stdout, stderr, limits: launch.limits })
}

/// A new channel and the descriptors of a cell that uses it.
#[derive(Debug)]
pub struct Channel {
    /// The host's end.
    pub host_end: std::os::unix::net::UnixStream,
    /// The cell's descriptors: the channel's other end as fd 3, `/dev/null` as its input, its
    /// standard streams as asked.
    pub io: CellIo,
    /// The read end of its standard output, when that is a pipe.
    pub stdout: Option<OwnedFd>,
    /// The read end of its standard error, when that is a pipe.
    pub stderr: Option<OwnedFd>,
}

/// A channel for a cell whose standard output and error go to `stdout` and `stderr`.
///
/// # Errors
///
/// A socket, pipe or `/dev/null` that cannot be had.
pub fn channel(stdout: Stream, stderr: Stream) -> std::io::Result<Channel> {
    let (host_end, cell_end) = std::os::unix::net::UnixStream::pair()?;
    let null = || -> std::io::Result<OwnedFd> {
        Ok(std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?.into())
    };
    let stream = |stream: Stream| -> std::io::Result<(Option<OwnedFd>, OwnedFd)> {
        match stream {
            Stream::Null => Ok((None, null()?)),
            Stream::Pipe { nonblocking } => {
                let (read, write) = code_runtime_sandbox::pipe(nonblocking)?;
                Ok((Some(read), write))
            }
        }
    };
    let (stdout_read, stdout_write) = stream(stdout)?;
    let (stderr_read, stderr_write) = stream(stderr)?;
    let io = CellIo {
        stdin: null()?,
        stdout: stdout_write,
        stderr: stderr_write,
        channel: cell_end.into(),
    };
    Ok(Channel { host_end, io, stdout: stdout_read, stderr: stderr_read })
}

impl Launched {
    /// Whether a run whose cell would get `limits` can use this one.
    pub fn fits(&self, limits: &CellLimits) -> bool {
        self.limits == *limits
    }

    /// Whether the cell is still there (nothing stopped it while it waited).
    pub fn is_alive(&mut self) -> bool {
        self.process.is_alive()
    }

    /// The host pid of the cell's init.
    pub fn pid(&self) -> libc::pid_t {
        self.process.cell().pid()
    }

    /// The read ends of the cell's standard output and error, for a protocol that reads them
    /// (`None` for a stream that is not a pipe, or taken already).
    pub fn take_streams(&mut self) -> (Option<OwnedFd>, Option<OwnedFd>) {
        (self.stdout.take(), self.stderr.take())
    }

    /// Kills the cell and waits until it is reaped.
    pub async fn discard(mut self) {
        self.process.kill();
        self.process.reap().await;
    }
}

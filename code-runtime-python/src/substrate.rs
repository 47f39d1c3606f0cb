//! One run's cell as the host loop's [`Substrate`]: the host side of the fd-3 protocol, the
//! captured pipes, the whole-cell budgets, and teardown.

use std::collections::{HashSet, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use code_runtime::provider::{
    BindingTable, CallId, Ending, Event, Start, StopReason, Substrate, Teardown, catalogue, reactor,
};
use code_runtime::{BindingArgs, BindingError, FailureKind, JsonValue, Limits};
use code_runtime_sandbox::{CellExit, CellIo, CellLimits, WatchedCell};
use futures::future::BoxFuture;
use futures::{Sink, StreamExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::PythonConfig;
use crate::cell::PythonCell;
use crate::codec::{FrameCodec, FrameError};
use crate::frame::{self, ChildFrame, Done};
use crate::pipe::PipeLines;
use crate::probe::Probe;

/// How long a run whose channel ended waits for its cell to exit by itself before it is killed.
const EXIT_GRACE: Duration = Duration::from_millis(100);

/// How many frames one poll reads before yielding, so a child that floods fd 3 (with junk, say)
/// cannot keep the host loop from its other branches.
const FRAMES_PER_POLL: usize = 64;

/// The `tracing` target of the wire: every frame either side writes, at `TRACE` level, as
/// `direction` (`host` or `child`) and `frame`; the prelude as `prelude_bytes`.
pub(crate) const WIRE: &str = "code_runtime_python::wire";

/// One run's cell, seen from the host.
pub(crate) struct ChildSubstrate {
    process: WatchedCell,
    frames: FramedRead<OwnedReadHalf, FrameCodec>,
    sink: FramedWrite<OwnedWriteHalf, FrameCodec>,
    /// Frames to the child, written by `poll_event` as the socket takes them: never awaited in
    /// place, so a child that stops reading fd 3 cannot stall the host loop, and never taken out
    /// before the sink accepted them, so none is lost when the loop polls something else.
    outbox: VecDeque<String>,
    writable: bool,
    table: Arc<BindingTable>,
    /// Sent once the child acknowledges `boot`.
    program: Option<String>,
    /// Each id is answered once; a repeated (forged) id is ignored.
    seen: HashSet<CallId>,
    stdout: PipeLines,
    stderr: PipeLines,
    limits: Limits,
    /// Whether fd 3 ended in the middle of a frame.
    truncated: bool,
}

/// A started cell whose interpreter has its bootstrap and waits for `boot`: everything a run
/// needs before it knows its program. Made for one run, or ahead of one (see `warm.rs`); used by
/// one run at most.
pub(crate) struct Launched {
    process: WatchedCell,
    frames: FramedRead<OwnedReadHalf, FrameCodec>,
    sink: FramedWrite<OwnedWriteHalf, FrameCodec>,
    stdout: OwnedFd,
    stderr: OwnedFd,
    /// What the cell was started with (its rlimits, the size of its `/tmp`).
    limits: CellLimits,
}

/// Starts a cell for a run under `limits` and sends its interpreter the bootstrap.
pub(crate) async fn launch(
    config: &PythonConfig,
    probe: &Probe,
    cell: &PythonCell,
    limits: &Limits,
) -> Result<Launched, Ending> {
    let failed =
        |what: &str, error: &dyn std::fmt::Display| Ending::Failed(format!("{what}: {error}"));
    let (host_end, child_end) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| failed("cannot create the channel", &e))?;
    let (stdout, stdout_write) =
        code_runtime_sandbox::pipe(false).map_err(|e| failed("cannot create a pipe", &e))?;
    let (stderr, stderr_write) =
        code_runtime_sandbox::pipe(false).map_err(|e| failed("cannot create a pipe", &e))?;
    let stdin =
        std::fs::File::open("/dev/null").map_err(|e| failed("cannot open /dev/null", &e))?;
    let io = CellIo {
        stdin: stdin.into(),
        stdout: stdout_write,
        stderr: stderr_write,
        channel: child_end.into(),
    };
    // The cell holds the other ends now: EOF on any of them means the cell is gone.
    let cell_limits = cell.limits(limits);
    let running =
        cell.start(io, cell_limits).await.map_err(|e| failed("cannot start python", &e))?;
    let mut process = reactor::enter(|| WatchedCell::new(running))
        .map_err(|e| failed("cannot watch python", &e))?;
    let (frames, sink) = match channel(host_end, &probe.bootstrap.prelude, config.frame_bytes()) {
        Ok(halves) => halves,
        Err(error) => {
            process.kill();
            return Err(failed("cannot send the bootstrap", &error));
        }
    };
    Ok(Launched { process, frames, sink, stdout, stderr, limits: cell_limits })
}

impl Launched {
    /// Whether a run whose cell would get `limits` can use this one.
    pub(crate) fn fits(&self, limits: &CellLimits) -> bool {
        self.limits == *limits
    }

    /// Whether the cell is still there (nothing stopped it while it waited).
    pub(crate) fn is_alive(&mut self) -> bool {
        self.process.is_alive()
    }

    /// The host pid of the cell's init.
    #[cfg(test)]
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.process.cell().pid()
    }

    /// Kills the cell and waits until it is reaped.
    pub(crate) async fn discard(mut self) {
        self.process.kill();
        self.process.reap().await;
    }

    /// The run's substrate: sends `boot`, then the program once the interpreter acknowledges.
    pub(crate) fn run(self, config: &PythonConfig, start: Start) -> ChildSubstrate {
        let cap = start.limits.output_bytes();
        let boot = frame::boot(
            &start.namespaces,
            &start.globals,
            start.limits.max_output_bytes,
            config.frame_bytes(),
        );
        ChildSubstrate {
            stdout: PipeLines::new(Some(self.stdout), cap),
            stderr: PipeLines::new(Some(self.stderr), cap),
            process: self.process,
            frames: self.frames,
            sink: self.sink,
            outbox: VecDeque::from([boot]),
            writable: true,
            table: start.table,
            program: Some(start.program),
            seen: HashSet::new(),
            limits: start.limits,
            truncated: false,
        }
    }
}

/// Writes the bootstrap's bytecode (the prelude), then makes the channel a pair of framed halves
/// on the reactor.
fn channel(
    host_end: std::os::unix::net::UnixStream,
    prelude: &[u8],
    frame_bytes: usize,
) -> std::io::Result<(FramedRead<OwnedReadHalf, FrameCodec>, FramedWrite<OwnedWriteHalf, FrameCodec>)>
{
    use std::io::Write;
    // The prelude goes first, raw, while the socket still blocks: it is a few tens of kilobytes,
    // well inside the socket's buffer, so this write does not wait on the child.
    (&host_end).write_all(prelude)?;
    tracing::trace!(target: WIRE, direction = "host", prelude_bytes = prelude.len());
    host_end.set_nonblocking(true)?;
    let stream = reactor::enter(|| tokio::net::UnixStream::from_std(host_end))?;
    let (reader, writer) = stream.into_split();
    Ok((
        FramedRead::new(reader, FrameCodec::new(frame_bytes)),
        FramedWrite::new(writer, FrameCodec::new(frame_bytes)),
    ))
}

impl Substrate for ChildSubstrate {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if let Some(event) = self.poll_memory(cx) {
            return Poll::Ready(event);
        }
        self.poll_write(cx);
        let event = self.poll_frames(cx).or_else(|| self.poll_pipes(cx));
        // A frame may have queued a reply (an unknown binding).
        self.poll_write(cx);
        match event {
            Some(event) => Poll::Ready(event),
            None => Poll::Pending,
        }
    }

    fn settle(&mut self, call: CallId, outcome: Result<JsonValue, BindingError>) {
        let reply = match &outcome {
            Ok(value) => frame::reply_ok(call, value),
            Err(rejection) => frame::reply_error(call, rejection),
        };
        if self.writable {
            self.outbox.push_back(reply);
        }
    }

    fn compute_used(&self) -> Duration {
        self.process.cpu_used()
    }

    fn stop(&mut self) {
        self.process.kill();
    }

    fn teardown(mut self, ending: Ending) -> BoxFuture<'static, Teardown> {
        Box::pin(async move {
            if matches!(ending, Ending::Exited(_)) {
                // The channel ended: the program is most likely gone and the init follows it at
                // once with its status, which killing the init first would lose.
                self.process.wait_exit(EXIT_GRACE).await;
            }
            // Give a program that already sent `done`, or died, no chance to linger.
            self.process.kill();
            // The pipes end as soon as the program's processes are dead, before the kernel has
            // torn the cell's namespaces down (unmounting its file system waits for RCU).
            let within = Duration::from_secs(1);
            let mut logs = self.stdout.drain(within).await;
            logs.extend(self.stderr.drain(within).await);
            let mut process = self.process;
            if !matches!(ending, Ending::Exited(_)) {
                // The result does not depend on how the cell ends: reap it in the background.
                let cleanup: BoxFuture<'static, ()> = Box::pin(async move {
                    process.reap().await;
                });
                return Teardown { ending, logs, cleanup: Some(cleanup) };
            }
            let exit = process.reap().await;
            let ending = refine(ending, exit, process.last_cpu(), &self.limits, self.truncated);
            Teardown::new(ending, logs)
        })
    }
}

impl ChildSubstrate {
    /// Compares the whole cell's memory with the budget when a look is due.
    fn poll_memory(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        let budget = self.limits.memory_bytes();
        let Poll::Ready(used) = self.process.poll_over_memory(cx, budget) else { return None };
        tracing::debug!(used, budget, "the cell is over its memory budget");
        self.process.kill();
        Some(Event::Ended(Ending::Stopped(StopReason::OutOfMemory {
            max_memory_mb: self.limits.max_memory_mb,
        })))
    }

    /// Moves queued frames into the sink and flushes it, as far as the socket takes them.
    fn poll_write(&mut self, cx: &mut Context<'_>) {
        let mut sink = std::pin::Pin::new(&mut self.sink);
        while self.writable && !self.outbox.is_empty() {
            match sink.as_mut().poll_ready(cx) {
                Poll::Ready(Ok(())) => {
                    let frame = self.outbox.pop_front().unwrap_or_default();
                    tracing::trace!(target: WIRE, direction = "host", frame = %frame);
                    if sink.as_mut().start_send(frame).is_err() {
                        self.writable = false;
                    }
                }
                // The child closed fd 3; its EOF ends the run on the read side.
                Poll::Ready(Err(_)) => self.writable = false,
                Poll::Pending => return,
            }
        }
        if self.writable && matches!(sink.as_mut().poll_flush(cx), Poll::Ready(Err(_))) {
            self.writable = false;
        }
        if !self.writable {
            self.outbox.clear();
        }
    }

    fn poll_frames(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        for _ in 0..FRAMES_PER_POLL {
            let line = match self.frames.poll_next_unpin(cx) {
                Poll::Pending => return None,
                Poll::Ready(Some(Ok(line))) => line,
                Poll::Ready(Some(Err(error @ FrameError::TooLong { .. }))) => {
                    return Some(Event::Ended(Ending::Failed(format!(
                        "protocol violation: {error}"
                    ))));
                }
                Poll::Ready(Some(Err(FrameError::Truncated { .. }))) => {
                    self.truncated = true;
                    return Some(Event::Ended(Ending::Exited(None)));
                }
                Poll::Ready(None | Some(Err(FrameError::Io(_)))) => {
                    return Some(Event::Ended(Ending::Exited(None)));
                }
            };
            tracing::trace!(target: WIRE, direction = "child", frame = %String::from_utf8_lossy(&line));
            if let Some(event) = ChildFrame::parse(&line).and_then(|frame| self.on_frame(frame)) {
                return Some(event);
            }
        }
        // More may be waiting; come back after the loop's other branches had their turn.
        cx.waker().wake_by_ref();
        None
    }

    fn on_frame(&mut self, frame: ChildFrame) -> Option<Event> {
        match frame {
            ChildFrame::BootAck => {
                // The first acknowledgement gets the program; later ones mean nothing.
                if let Some(program) = self.program.take() {
                    self.outbox.push_back(frame::run(&program));
                }
                None
            }
            // Nothing counts before the child acknowledged `boot`.
            _ if self.program.is_some() => None,
            ChildFrame::Log { text } => Some(Event::Log(text)),
            ChildFrame::Call { id, global, name, args } => self.on_call(id, &global, &name, args),
            ChildFrame::Done(done) => Some(Event::Ended(match done {
                Done::Completed(value) => Ending::Completed(value),
                Done::Failed { kind: FailureKind::OutputLimit, .. } => {
                    Ending::Stopped(StopReason::OutputExceeded)
                }
                Done::Failed { kind: FailureKind::InvalidOutput, message }
                    if message == "function" =>
                {
                    Ending::ReturnedFunction
                }
                Done::Failed { kind: FailureKind::InvalidOutput, .. } => Ending::InvalidOutput,
                Done::Failed { message, .. } => Ending::Threw(message),
            })),
        }
    }

    fn on_call(&mut self, id: CallId, global: &str, name: &str, args: JsonValue) -> Option<Event> {
        let args = BindingArgs::new(args);
        if !self.seen.insert(id) {
            return None;
        }
        match self.table.find(global, name) {
            Some(function) => Some(Event::Call { id, function, args }),
            None => {
                let label = format!("{global}.{name}");
                let rejection = BindingError::new(catalogue::unknown_binding(&label));
                self.outbox.push_back(frame::reply_error(id, &rejection));
                None
            }
        }
    }

    fn poll_pipes(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        for pipe in [&mut self.stdout, &mut self.stderr] {
            if let Poll::Ready(Some(line)) = pipe.poll_line(cx) {
                return Some(Event::Log(line));
            }
        }
        None
    }
}

/// An ending the loop could only guess at ([`Ending::Exited`]), made exact with the cell's exit:
/// the CPU limit's signals, a frame cut short, or the program's own exit code.
fn refine(
    ending: Ending,
    exit: Option<CellExit>,
    cpu_used: Duration,
    limits: &Limits,
    truncated: bool,
) -> Ending {
    let Ending::Exited(_) = ending else { return ending };
    // The cell's init exits with the program's status, `128 + signal` when it was killed.
    let code = exit.and_then(CellExit::status);
    let budget = Duration::from_millis(limits.compute_ms);
    if exit.is_some_and(|exit| exit.by_cpu_limit(cpu_used, budget)) {
        return Ending::Stopped(StopReason::Compute { compute_ms: limits.compute_ms });
    }
    if truncated && code == Some(0) {
        return Ending::Failed(
            "protocol violation: fd 3 closed in the middle of a frame".to_owned(),
        );
    }
    Ending::Exited(code)
}

//! One run's cell as the host loop's [`Substrate`]: the host side of the fd-3 protocol, the
//! captured pipes, the whole-cell budgets, and teardown.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use code_runtime::json;
use code_runtime::provider::{
    BindingTable, CallId, Ending, Event, Held, HostMemory, Start, StopReason, Substrate, Teardown,
    reactor,
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

/// Lines longer than this are parsed on one of the reactor's blocking threads, not in the host
/// loop: the host loop shares its thread with other runs, and a 100 MB line takes about a second
/// to parse. Shorter lines (every honest call and log, nearly) parse in place, in microseconds.
const INLINE_PARSE_BYTES: usize = 256 << 10;

/// How a line from fd 3 read: a frame, junk to drop, or more than the run may make the host hold.
type Parsed = Result<Option<ChildFrame>, frame::TooLarge>;

/// What the channel gave: a line (parsed), or its end.
enum Line {
    Parsed(Parsed),
    Ended(Ending),
}

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
    /// before the sink accepted them, so none is lost when the loop polls something else. Each
    /// answer holds its charge of the run's host memory until it is written.
    outbox: VecDeque<(String, Option<Held>)>,
    /// The run's account of what the host holds because of the program.
    memory: HostMemory,
    /// A long line being parsed off the host loop, with the charge of its text; later lines wait
    /// for it, in order.
    parsing: Option<(tokio::task::JoinHandle<Parsed>, Held)>,
    /// Set when an answer could not be queued within the memory budget: the run ends.
    over_budget: bool,
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
    pub(crate) fn run(mut self, config: &PythonConfig, start: Start) -> ChildSubstrate {
        self.frames.decoder_mut().charge_to(start.memory.clone());
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
            outbox: VecDeque::from([(boot, None)]),
            memory: start.memory,
            parsing: None,
            over_budget: false,
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
        if self.over_budget {
            return Poll::Ready(self.host_memory_spent());
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
        if !self.writable {
            return;
        }
        // The answer is the host's, but its size is the program's doing (a rejection quoting what
        // it passed, a value of what it asked for), and it waits until the child reads it.
        let reply = match &outcome {
            Ok(value) => frame::reply_ok(call, value),
            Err(rejection) => frame::reply_error(call, rejection),
        };
        match self.memory.hold(reply.len()) {
            Ok(held) => self.outbox.push_back((reply, Some(held))),
            Err(_) => self.over_budget = true,
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
    /// The ending of a run that made the host hold more than its memory budget; the cell goes.
    fn host_memory_spent(&mut self) -> Event {
        self.process.kill();
        Event::Ended(Ending::Stopped(StopReason::HostMemory {
            max_memory_mb: self.limits.max_memory_mb,
        }))
    }

    /// Compares the whole cell's memory with the budget when a look is due.
    fn poll_memory(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        let budget = self.limits.memory_bytes();
        let Poll::Ready(used) = self.process.poll_over_memory(cx, budget) else { return None };
        Some(self.out_of_memory(used))
    }

    /// The out-of-memory ending, when the cell holds more than its budget now: one last look
    /// when the program ends, as it may have grown past the budget since the last.
    fn over_memory(&mut self) -> Option<Event> {
        let used = self.process.over_memory(self.limits.memory_bytes())?;
        Some(self.out_of_memory(used))
    }

    fn out_of_memory(&mut self, used: u64) -> Event {
        tracing::debug!(
            used,
            budget = self.limits.memory_bytes(),
            "the cell is over its memory budget"
        );
        self.process.kill();
        Event::Ended(Ending::Stopped(StopReason::OutOfMemory {
            max_memory_mb: self.limits.max_memory_mb,
        }))
    }

    /// Moves queued frames into the sink and flushes it, as far as the socket takes them.
    fn poll_write(&mut self, cx: &mut Context<'_>) {
        let mut sink = std::pin::Pin::new(&mut self.sink);
        while self.writable && !self.outbox.is_empty() {
            match sink.as_mut().poll_ready(cx) {
                Poll::Ready(Ok(())) => {
                    // The charge goes as the sink takes the frame.
                    let (frame, _held) = self.outbox.pop_front().unwrap_or_default();
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
            let event = match self.poll_parsed(cx) {
                Poll::Ready(Some(Line::Parsed(Ok(Some(frame))))) => self.on_frame(frame),
                Poll::Ready(Some(Line::Parsed(Ok(None)))) | Poll::Ready(None) => None,
                Poll::Ready(Some(Line::Parsed(Err(_)))) => Some(self.host_memory_spent()),
                Poll::Ready(Some(Line::Ended(ending))) => Some(Event::Ended(ending)),
                Poll::Pending => return None,
            };
            if event.is_some() {
                return event;
            }
        }
        // More may be waiting; come back after the loop's other branches had their turn.
        cx.waker().wake_by_ref();
        None
    }

    /// The next line: one being parsed off the loop when it is done, else the next line read (a
    /// short one parsed here; a long one handed to a blocking thread, `Ready(None)` meanwhile).
    fn poll_parsed(&mut self, cx: &mut Context<'_>) -> Poll<Option<Line>> {
        if let Some((parsing, _held)) = &mut self.parsing {
            let joined = std::task::ready!(Pin::new(parsing).poll(cx));
            // The line's charge goes with it; the frame's values are charged as they are kept.
            self.parsing = None;
            return Poll::Ready(Some(Line::Parsed(joined.unwrap_or(Ok(None)))));
        }
        let line = match self.frames.poll_next_unpin(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(line))) => line,
            Poll::Ready(ended) => return Poll::Ready(Some(Line::Ended(self.channel_ended(ended)))),
        };
        tracing::trace!(target: WIRE, direction = "child", frame = %String::from_utf8_lossy(&line));
        // The line is held while it is parsed: what its values may take is what is left.
        let Ok(held) = self.memory.hold(line.len()) else {
            return Poll::Ready(Some(Line::Parsed(Err(frame::TooLarge {
                limit: self.memory.limit(),
            }))));
        };
        let room = self.memory.room();
        if line.len() <= INLINE_PARSE_BYTES {
            return Poll::Ready(Some(Line::Parsed(ChildFrame::parse_within(&line, room))));
        }
        match reactor::handle() {
            Ok(reactor) => {
                let parsing = reactor.spawn_blocking(move || ChildFrame::parse_within(&line, room));
                self.parsing = Some((parsing, held));
                Poll::Ready(None)
            }
            Err(_) => Poll::Ready(Some(Line::Parsed(ChildFrame::parse_within(&line, room)))),
        }
    }

    /// How the channel ended.
    fn channel_ended(&mut self, ended: Option<Result<bytes::BytesMut, FrameError>>) -> Ending {
        match ended {
            Some(Err(error @ FrameError::TooLong { .. })) => {
                Ending::Failed(format!("protocol violation: {error}"))
            }
            Some(Err(FrameError::OverBudget)) => {
                self.process.kill();
                Ending::Stopped(StopReason::HostMemory { max_memory_mb: self.limits.max_memory_mb })
            }
            Some(Err(FrameError::Truncated { .. })) => {
                self.truncated = true;
                Ending::Exited(None)
            }
            Some(Ok(_)) | None | Some(Err(FrameError::Io(_))) => Ending::Exited(None),
        }
    }

    fn on_frame(&mut self, frame: ChildFrame) -> Option<Event> {
        match frame {
            ChildFrame::BootAck => {
                // The first acknowledgement gets the program; later ones mean nothing.
                if let Some(program) = self.program.take() {
                    self.outbox.push_back((frame::run(&program), None));
                }
                None
            }
            // Nothing counts before the child acknowledged `boot`.
            _ if self.program.is_some() => None,
            ChildFrame::Log { text } => Some(Event::Log(text)),
            ChildFrame::Call { id, global, name, args } => self.on_call(id, &global, &name, args),
            ChildFrame::Done(done) => Some(self.over_memory().unwrap_or_else(|| {
                Event::Ended(match done {
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
                })
            })),
        }
    }

    fn on_call(&mut self, id: CallId, global: &str, name: &str, args: JsonValue) -> Option<Event> {
        if !self.seen.insert(id) {
            return None;
        }
        let Some(function) = self.table.find(global, name) else {
            // Named by the program, as long as it likes: the host cuts it in its answer.
            return Some(Event::Stray { id, label: format!("{global}.{name}") });
        };
        // The argument stays on the host while the call waits and runs: it is charged until the
        // closure lets it go.
        match self.memory.hold(json::held_bytes(&args)) {
            Ok(held) => Some(Event::Call { id, function, args: BindingArgs::held(args, held) }),
            Err(_) => Some(self.host_memory_spent()),
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

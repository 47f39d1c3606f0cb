//! One run's child process as the host loop's [`Substrate`]: the host side of the fd-3 protocol,
//! the captured pipes, and teardown.

use std::collections::{HashSet, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use code_runtime::provider::{
    BindingTable, CallId, CpuClock, Ending, Event, Start, StopReason, Substrate, Teardown,
    catalogue, reactor,
};
use code_runtime::{BindingArgs, BindingError, FailureKind, JsonValue, Limits};
use futures::future::BoxFuture;
use futures::{Sink, StreamExt};
use tokio::io::unix::AsyncFd;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::codec::{FrameCodec, FrameError};
use crate::command::{self, Rlimits};
use crate::frame::{self, ChildFrame, Done};
use crate::pipe::PipeLines;
use crate::probe::Probe;
use crate::{PythonConfig, spawner};

/// How many frames one poll reads before yielding, so a child that floods fd 3 (with junk, say)
/// cannot keep the host loop from its other branches.
const FRAMES_PER_POLL: usize = 64;

/// The `tracing` target of the wire: every frame either side writes, at `TRACE` level, as
/// `direction` (`host` or `child`) and `frame`; the prelude as `prelude_bytes`.
pub(crate) const WIRE: &str = "code_runtime_python::wire";

/// One run's child, seen from the host.
pub(crate) struct ChildSubstrate {
    process: Process,
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
    workdir: Option<Workdir>,
    limits: Limits,
    /// Whether fd 3 ended in the middle of a frame.
    truncated: bool,
}

/// Starts the child of one run (on the spawner thread) and sends it the bootstrap and `boot`.
pub(crate) async fn start(
    config: &PythonConfig,
    probe: &Probe,
    start: Start,
) -> Result<ChildSubstrate, Ending> {
    let failed = |what: &str, error: std::io::Error| Ending::Failed(format!("{what}: {error}"));
    let (host_end, child_end) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| failed("cannot create the channel", e))?;
    let workdir =
        Workdir::create().map_err(|e| failed("cannot create the working directory", e))?;
    let rlimits = Rlimits::of(&start.limits, config.pid_namespace);
    let (executable, path) = (probe.executable.clone(), workdir.path.clone());
    let supervisor = spawner::spawn(move || {
        // The child has its own copy as fd 3; ours closes here, so EOF means "the child is gone".
        command::spawn_run(&executable, &path, child_end.as_raw_fd(), rlimits)
    })
    .await
    .map_err(|e| failed("cannot start python", e))?;
    let mut process = Process::new(supervisor).map_err(|e| failed("cannot watch python", e))?;
    let (frames, sink) = match channel(host_end, &probe.bootstrap.prelude, config.frame_bytes()) {
        Ok(halves) => halves,
        Err(error) => {
            process.kill();
            return Err(failed("cannot send the bootstrap", error));
        }
    };
    let cap = start.limits.output_bytes();
    let boot = frame::boot(&start.namespaces, start.limits.max_output_bytes, config.frame_bytes());
    Ok(ChildSubstrate {
        stdout: PipeLines::new(process.supervisor.stdout.take().map(OwnedFd::from), cap),
        stderr: PipeLines::new(process.supervisor.stderr.take().map(OwnedFd::from), cap),
        process,
        frames,
        sink,
        outbox: VecDeque::from([boot]),
        writable: true,
        table: start.table,
        program: Some(start.program),
        seen: HashSet::new(),
        workdir: Some(workdir),
        limits: start.limits,
        truncated: false,
    })
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
        if let Ok(value) = outcome {
            code_runtime::json::drop_value(value);
        }
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
            // Give a worker that already sent `done`, or died, no chance to linger.
            self.process.kill();
            let status = self.process.reap().await;
            if let Some(workdir) = self.workdir.take() {
                workdir.remove().await;
            }
            let within = Duration::from_secs(1);
            let mut logs = self.stdout.drain(within).await;
            logs.extend(self.stderr.drain(within).await);
            let ending = self.refine(ending, status);
            Teardown { ending, logs }
        })
    }
}

impl ChildSubstrate {
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
            _ if self.program.is_some() => {
                frame.discard();
                None
            }
            ChildFrame::Log { text } => Some(Event::Log(text)),
            ChildFrame::Call { id, global, name, args } => self.on_call(id, &global, &name, args),
            ChildFrame::Done(done) => Some(Event::Ended(match done {
                Done::Completed(value) => Ending::Completed(value),
                Done::Failed { kind: FailureKind::OutputLimit, .. } => {
                    Ending::Stopped(StopReason::OutputExceeded)
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

    /// An ending the loop could only guess at, made exact with the worker's exit status.
    fn refine(&self, ending: Ending, status: Option<ExitStatus>) -> Ending {
        let Ending::Exited(_) = ending else { return ending };
        // The supervisor exits with the worker's status, `128 + signal` when it was killed.
        let code = status.and_then(|status| status.code());
        let by_cpu_limit = code == Some(128 + libc::SIGXCPU)
            || (code == Some(128 + libc::SIGKILL)
                && self.process.last_cpu() + Duration::from_millis(100)
                    >= Duration::from_millis(self.limits.compute_ms));
        if by_cpu_limit {
            return Ending::Stopped(StopReason::Compute { compute_ms: self.limits.compute_ms });
        }
        if self.truncated && code == Some(0) {
            return Ending::Failed(
                "protocol violation: fd 3 closed in the middle of a frame".to_owned(),
            );
        }
        Ending::Exited(code)
    }
}

/// The supervisor process and, inside it, the worker (the interpreter).
struct Process {
    supervisor: Child,
    /// The supervisor's pidfd on the reactor: readable once it exits.
    exited: Option<AsyncFd<OwnedFd>>,
    /// The worker's pidfd and CPU clock; signalling through a pidfd cannot hit a recycled pid.
    worker: Option<Worker>,
    /// The worker's CPU time at the last look, in microseconds (its clock goes with it).
    last_cpu_us: AtomicU64,
    reaped: Option<Option<ExitStatus>>,
}

struct Worker {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    cpu_clock: Option<CpuClock>,
}

impl Process {
    fn new(supervisor: Child) -> std::io::Result<Self> {
        let exited = match pidfd_open(supervisor.id() as libc::pid_t) {
            Some(fd) => {
                // SAFETY: the `OwnedFd` moves into the `AsyncFd`, which owns it (and only it) until
                // it is dropped.
                let registered = reactor::enter(|| unsafe {
                    AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
                });
                Some(registered.map_err(std::io::Error::from)?)
            }
            None => None,
        };
        let worker = command::worker_pid(supervisor.id()).map(|pid| Worker {
            pid,
            pidfd: pidfd_open(pid),
            cpu_clock: CpuClock::process(pid),
        });
        Ok(Self { supervisor, exited, worker, last_cpu_us: AtomicU64::new(0), reaped: None })
    }

    /// CPU time the worker has used (all its threads); the last reading once it is gone.
    fn cpu_used(&self) -> Duration {
        let now = self.worker.as_ref().and_then(|worker| worker.cpu_clock).map(CpuClock::used);
        if let Some(now) = now.filter(|now| !now.is_zero()) {
            let micros = u64::try_from(now.as_micros()).unwrap_or(u64::MAX);
            self.last_cpu_us.fetch_max(micros, Ordering::Relaxed);
        }
        self.last_cpu()
    }

    fn last_cpu(&self) -> Duration {
        Duration::from_micros(self.last_cpu_us.load(Ordering::Relaxed))
    }

    fn kill(&mut self) {
        if self.reaped.is_some() {
            return;
        }
        let _ = self.cpu_used();
        match &self.worker {
            Some(Worker { pidfd: Some(pidfd), .. }) => {
                // SAFETY: pidfd_send_signal on a pidfd we own; no siginfo.
                unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        pidfd.as_raw_fd(),
                        libc::SIGKILL,
                        std::ptr::null::<u8>(),
                        0,
                    )
                };
            }
            Some(Worker { pid, .. }) => {
                // SAFETY: kill has no memory effects. The worker cannot have been reaped and its
                // pid reused yet: its parent, the supervisor, is alive until we reap it.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            // No worker pid: kill the supervisor; the worker's parent-death signal follows.
            None => {
                let _ = self.supervisor.kill();
            }
        }
    }

    /// Waits for the supervisor to exit (it does once the worker and all it started are gone)
    /// and reaps it; its status mirrors the worker's.
    async fn reap(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.reaped {
            return status;
        }
        // The supervisor never blocks for long; if it does, take it down and its worker with it
        // (parent-death signal).
        if !self.wait_exit(Duration::from_secs(10)).await {
            let _ = self.supervisor.kill();
            self.wait_exit(Duration::from_secs(10)).await;
        }
        let status = self.supervisor.wait().ok();
        self.reaped = Some(status);
        status
    }

    async fn wait_exit(&mut self, within: Duration) -> bool {
        let Some(exited) = &self.exited else {
            // No pidfd (a kernel before 5.3): poll.
            let poll = async {
                while matches!(self.supervisor.try_wait(), Ok(None)) {
                    reactor::enter(|| tokio::time::sleep(Duration::from_millis(5))).await;
                }
            };
            return reactor::enter(|| tokio::time::timeout(within, poll)).await.is_ok();
        };
        let readable = reactor::enter(|| tokio::time::timeout(within, exited.readable())).await;
        matches!(readable, Ok(Ok(_)))
    }
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor we own.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: on success the return value is a fresh descriptor owned by nobody else.
    (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw as i32) })
}

/// A fresh, empty, private working directory for one run, removed afterwards.
struct Workdir {
    path: PathBuf,
}

impl Workdir {
    fn create() -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "code-runtime-python-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self { path })
    }

    /// Removes the directory off the reactor thread: a program can leave many files behind.
    async fn remove(mut self) {
        let path = std::mem::take(&mut self.path);
        if let Ok(reactor) = reactor::handle() {
            let _ = reactor.spawn_blocking(move || std::fs::remove_dir_all(path)).await;
        }
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        // Only a run that never started gets here with a path.
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

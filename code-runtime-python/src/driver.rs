//! One run, from spawn to reaped child: the host side of the fd-3 protocol, the budgets, the
//! output ledger, and teardown.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::future::pending;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use code_runtime::json::{self, JsonValue};
use code_runtime::{
    Admission, BindingError, CodeRunFailure, CodeRunRequest, CodeRunResult, FailureKind, Outcome,
    OutputLedger, RunPermit,
};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, SinkExt, StreamExt};
use serde_json::Number;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use crate::codec::{FrameCodec, FrameError};
use crate::command::{self, Rlimits};
use crate::config::PythonConfig;
use crate::frame::{self, ChildFrame, Done};

/// What every run of one runtime shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: PythonConfig,
    pub(crate) executable: PathBuf,
    pub(crate) bootstrap: command::Bootstrap,
    /// The gate's disposal token (see `code_runtime::RunGate`).
    pub(crate) disposed: CancellationToken,
}

/// Why the run loop stopped.
enum End {
    Done(Done),
    Cancelled,
    Disposed,
    WallClock,
    Compute,
    /// fd 3 reached EOF (or failed) without a `done`: the worker died or closed it.
    ChannelClosed,
    Protocol(String),
    OutputExceeded,
}

/// Runs `request` (already validated) to its end. Never fails: every way a run can end is a result.
pub(crate) async fn run(
    shared: &Shared,
    request: CodeRunRequest,
    permit: RunPermit,
) -> CodeRunResult {
    let limits = shared.config.limits;
    let mut ledger = limits.ledger();
    let start = Instant::now();
    let (host_end, child_end) = match std::os::unix::net::UnixStream::pair() {
        Ok(pair) => pair,
        Err(error) => return settle_spawn_failure(ledger, &error),
    };
    let workdir = match Workdir::create() {
        Ok(dir) => dir,
        Err(error) => return settle_spawn_failure(ledger, &error),
    };
    let rlimits = Rlimits {
        address_space: limits.max_memory_mb.saturating_mul(1 << 20),
        // RLIMIT_CPU is only the kernel's backstop behind the millisecond polling below.
        cpu_seconds: limits.compute_ms.div_ceil(1000) + 1,
        pid_namespace: shared.config.pid_namespace,
    };
    let child =
        command::spawn_run(&shared.executable, &workdir.path, child_end.as_raw_fd(), rlimits);
    // The child has its own copy as fd 3; ours must close so EOF means "the child is gone".
    drop(child_end);
    let child = match child {
        Ok(child) => child,
        Err(error) => return settle_spawn_failure(ledger, &error),
    };
    let line_cap = usize::try_from(limits.max_output_bytes).unwrap_or(usize::MAX);
    let mut substrate = Substrate::new(child, workdir, permit, line_cap);

    let end = match drive(shared, &request, &mut ledger, &mut substrate, host_end, start).await {
        Ok(end) => end,
        Err(error) => End::Protocol(error.to_string()),
    };
    let status = substrate.teardown().await;
    substrate.drain_pipes(&mut ledger).await;

    let outcome = match end {
        End::Done(Done::Completed(value)) => Outcome::Completed(value),
        End::Done(Done::Failed { kind: FailureKind::OutputLimit, .. }) | End::OutputExceeded => {
            ledger.exceed();
            Outcome::Completed(None)
        }
        End::Done(Done::Failed { kind: FailureKind::InvalidOutput, .. }) => {
            Outcome::Failed(CodeRunFailure::invalid_output())
        }
        End::Done(Done::Failed { message, .. }) => {
            Outcome::Failed(CodeRunFailure::exception(message))
        }
        End::Cancelled => Outcome::Failed(CodeRunFailure::cancelled()),
        End::Disposed => Outcome::Failed(CodeRunFailure::runtime_disposed()),
        End::WallClock => Outcome::Failed(CodeRunFailure::wall_clock_reached(limits.max_wall_ms)),
        End::Compute => {
            Outcome::Failed(CodeRunFailure::compute_budget_exhausted(limits.compute_ms))
        }
        End::Protocol(detail) => {
            Outcome::Failed(CodeRunFailure::worker_error(format!("protocol violation: {detail}")))
        }
        End::ChannelClosed => {
            // RLIMIT_CPU's SIGXCPU or SIGKILL means the compute budget ran out between two polls.
            let cpu_signal = status
                .and_then(|status| status.code())
                .is_some_and(|code| code == 128 + libc::SIGXCPU || code == 128 + libc::SIGKILL);
            if cpu_signal && substrate.cpu_used() >= Duration::from_millis(limits.compute_ms) {
                Outcome::Failed(CodeRunFailure::compute_budget_exhausted(limits.compute_ms))
            } else {
                let code = status
                    .and_then(|status| status.code())
                    .map_or_else(|| "unknown".to_owned(), |c| c.to_string());
                Outcome::Failed(CodeRunFailure::worker_exited(code))
            }
        }
    };
    ledger.settle(outcome)
}

fn settle_spawn_failure(ledger: OutputLedger, error: &std::io::Error) -> CodeRunResult {
    ledger.settle(Outcome::Failed(CodeRunFailure::worker_error(format!(
        "cannot start python: {error}"
    ))))
}

/// The protocol loop: boot, run, then frames, binding calls, raw output and budgets until one of
/// them ends the run.
async fn drive(
    shared: &Shared,
    request: &CodeRunRequest,
    ledger: &mut OutputLedger,
    substrate: &mut Substrate,
    channel: std::os::unix::net::UnixStream,
    start: Instant,
) -> Result<End, std::io::Error> {
    let limits = shared.config.limits;
    let frame_bytes = shared.config.frame_bytes();
    // The bootstrap's bytecode goes first, raw, before the socket turns non-blocking: it is a few
    // tens of kilobytes, well inside the socket's buffer, so this write does not wait on the child.
    {
        use std::io::Write;
        (&channel).write_all(&shared.bootstrap.prelude)?;
    }
    channel.set_nonblocking(true)?;
    let (reader, writer) = tokio::net::UnixStream::from_std(channel)?.into_split();
    let mut frames = FramedRead::new(reader, FrameCodec::new(frame_bytes));

    // Frames to the child are queued and written by a branch of the loop below, never awaited in
    // place: a child that stops reading fd 3 (a spinning program) must not stall the loop, which
    // still has budgets to enforce. The queue grows by one frame per call the child made.
    let mut sink = FramedWrite::new(writer, FrameCodec::new(frame_bytes));
    let mut outbox = VecDeque::new();
    let mut writable = true;
    outbox.push_back(frame::boot(&request.bindings, limits.max_output_bytes, frame_bytes));

    let wall_deadline = start + Duration::from_millis(limits.max_wall_ms);
    let compute = Duration::from_millis(limits.compute_ms);
    let mut next_cpu_check = Instant::now();
    let cancelled = request.cancelled();
    tokio::pin!(cancelled);
    let mut calls: FuturesUnordered<PendingCall> = FuturesUnordered::new();
    let mut seen_ids = HashSet::new();
    let mut booted = false;

    loop {
        tokio::select! {
            biased;
            () = &mut cancelled => return Ok(End::Cancelled),
            () = shared.disposed.cancelled() => return Ok(End::Disposed),
            () = tokio::time::sleep_until(wall_deadline) => return Ok(End::WallClock),
            () = tokio::time::sleep_until(next_cpu_check) => {
                let used = substrate.cpu_used();
                if used >= compute {
                    return Ok(End::Compute);
                }
                // CPU time cannot grow faster than wall time times the cores the worker may use:
                // wake when the rest of the budget could be spent at the earliest, not on a timer.
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
                let wait = ((compute - used) / cores).max(Duration::from_millis(1));
                next_cpu_check = Instant::now() + wait;
            }
            line = frames.next() => {
                let line = match line {
                    None | Some(Err(FrameError::Io(_))) => return Ok(End::ChannelClosed),
                    Some(Err(error @ FrameError::TooLong { .. })) => return Ok(End::Protocol(error.to_string())),
                    Some(Ok(line)) => line,
                };
                match ChildFrame::parse(&line) {
                    Some(ChildFrame::BootAck) if !booted => {
                        booted = true;
                        outbox.push_back(frame::run(&request.program));
                    }
                    // Anything before the boot-ack, and any later boot-ack, is ignored.
                    None | Some(ChildFrame::BootAck) => {}
                    Some(_) if !booted => {}
                    Some(ChildFrame::Log { text }) => {
                        if ledger.admit_log(text) == Admission::Exceeded {
                            return Ok(End::OutputExceeded);
                        }
                    }
                    Some(ChildFrame::Call { id, global, name, args }) => {
                        // Each id is answered once; a repeated id (forged) is ignored.
                        if !seen_ids.insert(json::encode(&JsonValue::Number(id.clone()))) {
                            json::drop_value(args);
                            continue;
                        }
                        let function = request
                            .bindings
                            .iter()
                            .find(|namespace| namespace.global == global)
                            .and_then(|namespace| namespace.functions.get(&name));
                        match function {
                            Some(function) => {
                                let call = AssertUnwindSafe(function.call(args)).catch_unwind();
                                let label = format!("{global}.{name}");
                                // Polled right here, not spawned: one thread hop less per call.
                                calls.push(Box::pin(async move { (id, label, call.await) }));
                            }
                            None => {
                                json::drop_value(args);
                                let message = format!("unknown binding {}", json::quote(&format!("{global}.{name}")));
                                outbox.push_back(frame::reply_error(&id, &message));
                            }
                        }
                    }
                    Some(ChildFrame::Done(done)) => return Ok(End::Done(done)),
                }
            }
            Some((id, label, outcome)) = calls.next(), if !calls.is_empty() => {
                outbox.push_back(reply(&id, &label, outcome));
            }
            written = write_queued(&mut sink, &mut outbox),
                if writable && (!outbox.is_empty() || !sink.write_buffer().is_empty()) =>
            {
                // A failed write means the child closed fd 3; its EOF ends the run on the read side.
                if written.is_err() {
                    writable = false;
                    outbox.clear();
                }
            }
            chunk = substrate.stdout.next_chunk() => {
                for line in chunk {
                    if ledger.admit_log(line) == Admission::Exceeded {
                        return Ok(End::OutputExceeded);
                    }
                }
            }
            chunk = substrate.stderr.next_chunk() => {
                for line in chunk {
                    if ledger.admit_log(line) == Admission::Exceeded {
                        return Ok(End::OutputExceeded);
                    }
                }
            }
        }
    }
}

type CallOutcome = std::thread::Result<Result<JsonValue, BindingError>>;

/// A binding call in flight: its id, `global.name` for diagnostics, and how it ended.
type PendingCall = Pin<Box<dyn Future<Output = (Number, String, CallOutcome)> + Send>>;

/// Moves every queued frame into the sink and flushes it. Cancel-safe: a frame leaves the queue
/// only into the sink's buffer, which the next call flushes.
async fn write_queued(
    sink: &mut FramedWrite<tokio::net::unix::OwnedWriteHalf, FrameCodec>,
    outbox: &mut VecDeque<String>,
) -> Result<(), FrameError> {
    while let Some(frame) = outbox.pop_front() {
        sink.feed(frame).await?;
    }
    sink.flush().await
}

/// The reply frame for one finished binding call.
fn reply(id: &Number, label: &str, outcome: CallOutcome) -> String {
    match outcome {
        Ok(Ok(value)) => {
            let frame = if json::validate(&value).is_ok() {
                frame::reply_ok(id, &value)
            } else {
                frame::reply_error(id, "binding resolution must be lossless JSON")
            };
            json::drop_value(value);
            frame
        }
        Ok(Err(error)) => frame::reply_error(id, error.message()),
        Err(_panic) => frame::reply_error(id, &format!("binding {} panicked", json::quote(label))),
    }
}

/// The child of one run and what it owns: the worker's pid for CPU accounting and killing, the
/// captured stdout and stderr, and the working directory.
struct Substrate {
    /// `None` only once handed to the background reaper of `Drop`.
    child: Option<Child>,
    /// The worker's pidfd: signalling through it cannot hit a recycled pid.
    worker: Option<Worker>,
    stdout: PipeLines,
    stderr: PipeLines,
    workdir: Option<Workdir>,
    reaped: bool,
    permit: Option<RunPermit>,
}

struct Worker {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    cpu_clock: Option<libc::clockid_t>,
}

impl Substrate {
    fn new(mut child: Child, workdir: Workdir, permit: RunPermit, line_cap: usize) -> Self {
        let worker = child.id().and_then(command::worker_pid).map(|pid| {
            // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor we own.
            let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            // SAFETY: on success the return value is a fresh descriptor owned by nobody else.
            let pidfd = (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw as i32) });
            let mut clock: libc::clockid_t = 0;
            // SAFETY: clock_getcpuclockid writes one clockid_t we own.
            let cpu_clock =
                (unsafe { libc::clock_getcpuclockid(pid, &mut clock) } == 0).then_some(clock);
            Worker { pid, pidfd, cpu_clock }
        });
        Self {
            stdout: PipeLines::new(child.stdout.take(), line_cap),
            stderr: PipeLines::new(child.stderr.take(), line_cap),
            child: Some(child),
            worker,
            workdir: Some(workdir),
            reaped: false,
            permit: Some(permit),
        }
    }

    /// CPU time the worker has used (all its threads), or zero once it is gone.
    fn cpu_used(&self) -> Duration {
        let Some(clock) = self.worker.as_ref().and_then(|worker| worker.cpu_clock) else {
            return Duration::ZERO;
        };
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec we own; a stale clock id fails with EINVAL.
        if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
            return Duration::ZERO;
        }
        Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    }

    fn kill(&self) {
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
                // pid reused yet: its parent, the supervisor, is alive until we reap it below.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            None => {
                // No worker pid: kill the supervisor; the worker's parent-death signal follows.
                if let Some(child) = &self.child {
                    // SAFETY: kill has no memory effects; the supervisor is unreaped, so its pid
                    // is still its own.
                    child.id().map(|pid| unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) });
                }
            }
        }
    }

    /// Kills the worker (the supervisor then ends everything it started and exits) and reaps the
    /// supervisor. Returns the supervisor's exit status, which mirrors the worker's.
    async fn teardown(&mut self) -> Option<ExitStatus> {
        // Give a worker that already sent `done` or died no chance to linger.
        self.kill();
        let child = self.child.as_mut()?;
        let status = match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
            Ok(status) => status.ok(),
            Err(_elapsed) => {
                // The supervisor never blocks for long; if it does, take it down and its worker
                // with it (parent-death signal).
                let _ = child.start_kill();
                child.wait().await.ok()
            }
        };
        self.reaped = true;
        if let Some(workdir) = self.workdir.take() {
            workdir.remove().await;
        }
        status
    }

    /// Output already written to the pipes when the child died is still the program's output.
    async fn drain_pipes(&mut self, ledger: &mut OutputLedger) {
        let drain = async {
            for pipe in [&mut self.stdout, &mut self.stderr] {
                while !pipe.is_closed() {
                    for line in pipe.next_chunk().await {
                        let _ = ledger.admit_log(line);
                    }
                }
            }
        };
        // Everything that could hold the pipes open is dead; the bound only guards the host.
        let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
    }
}

impl Drop for Substrate {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // The run future was dropped mid-run: kill now, reap and clean up in the background, and
        // keep the runtime's run permit until then so `dispose` still waits for this child.
        self.kill();
        let Some(mut child) = self.child.take() else { return };
        let workdir = self.workdir.take();
        let permit = self.permit.take();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = child.wait().await;
                if let Some(workdir) = workdir {
                    workdir.remove().await;
                }
                drop(permit);
            });
        }
    }
}

/// Lines of one captured pipe (the program's raw writes to fd 1 or 2).
struct PipeLines {
    pipe: Option<Box<dyn AsyncRead + Unpin + Send>>,
    partial: Vec<u8>,
    /// A line longer than this is passed on unfinished: it already exceeds any output budget.
    cap: usize,
}

impl PipeLines {
    fn new(pipe: Option<impl AsyncRead + Unpin + Send + 'static>, cap: usize) -> Self {
        Self {
            pipe: pipe.map(|pipe| Box::new(pipe) as Box<dyn AsyncRead + Unpin + Send>),
            partial: Vec::new(),
            cap,
        }
    }

    fn is_closed(&self) -> bool {
        self.pipe.is_none()
    }

    /// The complete lines of the next chunk; pends forever once the pipe is closed.
    async fn next_chunk(&mut self) -> Vec<String> {
        let Some(pipe) = &mut self.pipe else { return pending().await };
        let mut buffer = [0u8; 8192];
        let read = pipe.read(&mut buffer).await.unwrap_or(0);
        let mut lines = Vec::new();
        if read == 0 {
            self.pipe = None;
            if !self.partial.is_empty() {
                lines
                    .push(String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned());
            }
            return lines;
        }
        for &byte in &buffer[..read] {
            if byte == b'\n' {
                lines
                    .push(String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned());
            } else {
                self.partial.push(byte);
                if self.partial.len() > self.cap {
                    lines.push(
                        String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned(),
                    );
                }
            }
        }
        lines
    }
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

    async fn remove(self) {
        let _ = tokio::fs::remove_dir_all(&self.path).await;
    }
}

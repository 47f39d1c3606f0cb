//! The host side of `process` isolation: every run's isolate lives in a sandbox cell of its own
//! (a process started from the cell executable, see `cell.rs`), driven over the cell's channel as
//! the host loop's [`Substrate`].
//!
//! What the cell adds to `thread` isolation: a V8 fatal error ends the cell, not the host; the
//! compute budget counts every thread of the cell (V8's own included); the cell's memory is
//! watched as a whole; and the program's V8 sees no file, no network and no other process.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use code_runtime::json;
use code_runtime::provider::{
    CallId, Ending, Event, Held, HostMemory, Spare, StopReason, Substrate, Teardown, reactor,
};
use code_runtime::{BindingArgs, BindingError, JsonValue, Limits};
use code_runtime_sandbox::{
    CellExit, CellIo, CellLimits, CellPlan, CellSpec, Containment, WatchedCell,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::io::AsyncWrite;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::bytes::{Buf, BytesMut};
use tokio_util::codec::{Decoder, FramedRead};

use crate::config::WorkerThreadConfig;
use crate::program::{Program, Shape};
use crate::wire::{self, FromCell, Unread};
use crate::{WorkerThreadError, cell};

/// What a cell may hold beyond the run's memory budget before the host stops it: V8's own
/// memory outside its heap (its isolate, compiler zones, code, the platform threads' stacks) and
/// room for the heap limit's one extension to begin (see `memory.rs`). Measured: a cell whose
/// program waits on a call holds 3.2 MB of anonymous memory (`Pss_Anon`, release build); its
/// executable's pages are files, not counted. A program that grows past this ends as the in-cell
/// limits would have ended it: out of memory (a 128 MiB string flattened under a 64 MB budget,
/// which the heap limit's extension let through, included).
const CELL_OVERHEAD_BYTES: u64 = 32 << 20;

/// The address space of each of the cell's processes, beyond twice the memory budget. V8
/// reserves far more address space than it uses: an idle cell maps 17 GB and peaks at 50 GB
/// while it starts (the C++ heap's cage is reserved at twice its size to align it), so this
/// limit is no memory budget, only a ceiling; the budget is held by V8's heap limit, the
/// ArrayBuffer allocator and the host's look at the whole cell's resident memory.
const CELL_ADDRESS_SPACE_BYTES: u64 = 64 << 30;

/// How long a run whose channel ended waits for its cell to exit by itself before it is killed.
const EXIT_GRACE: Duration = Duration::from_millis(100);

/// How long teardown reads what a stopped cell wrote before it was killed.
const DRAIN_WITHIN: Duration = Duration::from_secs(1);

/// How long construction waits for a trial cell to run `return 1`.
const CHECK_WITHIN: Duration = Duration::from_secs(20);

/// How many frames one poll reads before yielding to the host loop's other branches.
const FRAMES_PER_POLL: usize = 64;

/// Frames longer than this are parsed on one of the reactor's blocking threads, not in the host
/// loop, which shares its thread with other runs (a 100 MB frame takes about a second to parse).
const INLINE_PARSE_BYTES: usize = 256 << 10;

/// How a frame from the cell read.
type Parsed = Result<FromCell, Unread>;

/// The cells of one provider: the plan every run's cell is started from, and the spare.
#[derive(Debug)]
pub(crate) struct Cells {
    launcher: Arc<Launcher>,
    spare: Spare<Launched>,
}

#[derive(Debug)]
struct Launcher {
    plan: CellPlan,
    executable: PathBuf,
    limits: Limits,
    /// The spare's shape (the provider's limits).
    shape: Shape,
}

impl Cells {
    /// Plans the cells of `config` and checks that its cell executable runs a program in one.
    pub(crate) fn new(config: &WorkerThreadConfig) -> Result<Self, WorkerThreadError> {
        // This process's own executable serves cells once its `main` called
        // `serve_cell_if_asked`: no trial cell is needed to know it (a one-shot host saves one).
        let trusted = config.cell_executable.is_none() && cell::serves_cells();
        let executable = match &config.cell_executable {
            Some(path) => path.clone(),
            None => std::env::current_exe().map_err(|error| WorkerThreadError::Cell {
                executable: PathBuf::from("(this executable)"),
                why: format!("cannot find this process's executable: {error}"),
            })?,
        };
        let executable = std::fs::canonicalize(&executable).map_err(|error| {
            WorkerThreadError::Cell { executable: executable.clone(), why: error.to_string() }
        })?;
        let spec = CellSpec {
            executable: executable.clone(),
            args: vec![executable.clone().into_os_string(), cell::CELL_ARG.into()],
            read_only: vec![executable.clone()],
            options: config.sandbox,
            machine_cache: config.machine_cache.clone(),
        };
        let plan = CellPlan::new(&spec)?;
        let shape = crate::substrate::shape(config, &config.limits);
        let launcher = Arc::new(Launcher { plan, executable, limits: config.limits, shape });
        if !trusted {
            launcher.check()?;
        }
        let starter = launcher.clone();
        let spare = Spare::new(
            if config.warm { crate::WARM } else { 0 },
            move || {
                let launcher = starter.clone();
                Box::pin(
                    async move { launcher.launch(&launcher.limits, launcher.shape).await.ok() },
                )
            },
            |launched| Box::pin(launched.discard()),
        );
        Ok(Self { launcher, spare })
    }

    /// The layers that hold for every run.
    pub(crate) fn containment(&self) -> Containment {
        self.launcher.plan.containment()
    }

    /// The substrate of a run of `program` under `limits`: the spare cell when it fits (its
    /// isolate is made already), else a new one.
    pub(crate) async fn start(
        &self,
        shape: Shape,
        program: Program,
        limits: Limits,
        memory: HostMemory,
    ) -> Result<CellSubstrate, Ending> {
        let wanted = (cell_limits(&limits), shape);
        if wanted == (cell_limits(&self.launcher.limits), self.launcher.shape) {
            if let Some(mut launched) = self.spare.take().await {
                if (launched.limits, launched.shape) == wanted && launched.process.is_alive() {
                    return Ok(launched.run(program, limits, memory));
                }
                reactor::spawn(launched.discard());
            }
        }
        Ok(self.launcher.launch(&limits, shape).await?.run(program, limits, memory))
    }

    /// Ends the spare cell before returning.
    pub(crate) async fn close(&self) {
        self.spare.close().await;
    }
}

/// The cell's limits for a run under `limits`. `RLIMIT_CPU` is only the kernel's backstop behind
/// the host's polling of the whole cell's CPU time, so it is rounded up and given a second.
fn cell_limits(limits: &Limits) -> CellLimits {
    let memory = limits.memory_bytes();
    CellLimits {
        memory_bytes: memory.saturating_mul(2).saturating_add(CELL_ADDRESS_SPACE_BYTES),
        // Nothing in a V8 cell writes files: its `/tmp` only needs to exist.
        file_bytes: 1 << 20,
        ..CellLimits::new(memory, limits.compute_ms.div_ceil(1000) + 1)
    }
}

impl Launcher {
    /// Starts a cell and tells it what its isolate is made with; it makes the isolate while it
    /// waits for a run's setup.
    async fn launch(&self, limits: &Limits, shape: Shape) -> Result<Launched, Ending> {
        let failed =
            |what: &str, error: &dyn std::fmt::Display| Ending::Failed(format!("{what}: {error}"));
        let (host_end, stderr, io) =
            channel_and_io().map_err(|e| failed("cannot start a cell", &e))?;
        let cell_limits = cell_limits(limits);
        let running = self
            .plan
            .start(io, cell_limits)
            .await
            .map_err(|e| failed("cannot start the V8 cell", &e))?;
        let mut process = reactor::enter(|| WatchedCell::new(running))
            .map_err(|e| failed("cannot watch the V8 cell", &e))?;
        // The first frame, while the socket still blocks: a few bytes into an empty buffer.
        let halves = (&host_end)
            .write_all(&wire::prepare(shape))
            .and_then(|()| host_end.set_nonblocking(true))
            .and_then(|()| reactor::enter(|| tokio::net::UnixStream::from_std(host_end)));
        let stream = match halves {
            Ok(stream) => stream,
            Err(error) => {
                process.kill();
                return Err(failed("cannot watch the V8 cell's channel", &error));
            }
        };
        let (reader, writer) = stream.into_split();
        Ok(Launched {
            process,
            frames: FramedRead::new(reader, CellFrames::new(frame_limit(limits))),
            writer,
            stderr,
            limits: cell_limits,
            shape,
        })
    }

    /// Runs `return 1` in a cell as a run would, synchronously: an executable that does not
    /// serve cells, or a cell that cannot start V8, is found at construction, not in every run.
    fn check(&self) -> Result<(), WorkerThreadError> {
        let invalid =
            |why: String| WorkerThreadError::Cell { executable: self.executable.clone(), why };
        let (host_end, stderr, io) =
            channel_and_io().map_err(|error| invalid(format!("cannot start a cell: {error}")))?;
        let limits = Limits { compute_ms: CHECK_WITHIN.as_millis() as u64, ..self.limits };
        let mut running = futures::executor::block_on(self.plan.start(io, cell_limits(&limits)))
            .map_err(|error| invalid(error.to_string()))?;
        let outcome = trial_run(&host_end);
        running.kill();
        drop(host_end);
        let exit = running.wait_timeout(CHECK_WITHIN);
        outcome.map_err(|why| {
            let stderr = read_stderr(&stderr);
            let said = fatal_in(&stderr).map(|line| format!(" ({line})")).unwrap_or_default();
            invalid(format!(
                "it does not serve V8 cells ({why}; it ended as {exit:?}{said}); a host that \
                 runs TypeScript in `process` isolation calls \
                 `code_runtime_worker_thread::serve_cell_if_asked()` first in `main`, or names an \
                 executable that does in `cell_executable`"
            ))
        })
    }
}

/// Sends the trial program and reads its frames until its ending.
fn trial_run(channel: &std::os::unix::net::UnixStream) -> Result<(), String> {
    let shape = Shape { max_memory_mb: 64, allow_eval: false, allow_wasm: false };
    let program = Program {
        body: "return 1".to_owned(),
        parameters: vec!["console".to_owned()],
        namespaces: Vec::new(),
        globals: Vec::new(),
        tools: None,
        max_output_bytes: 1024,
    };
    (&*channel).write_all(&wire::prepare(shape)).map_err(|error| error.to_string())?;
    (&*channel).write_all(&wire::setup(&program)).map_err(|error| error.to_string())?;
    let reader = crate::message::FrameReader::new(std::sync::Arc::new(
        channel.try_clone().map_err(|e| e.to_string())?,
    ));
    let deadline = Instant::now() + CHECK_WITHIN;
    while Instant::now() < deadline {
        let payload = match reader.next(deadline.saturating_duration_since(Instant::now())) {
            Ok(payload) => payload,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err("it closed its channel without an answer".to_owned());
            }
        };
        match wire::from_cell(&payload, 64) {
            Ok(FromCell::Event(Event::Ended(Ending::Completed(Some(value))))) if value == 1 => {
                return Ok(());
            }
            Ok(FromCell::Event(Event::Ended(ending))) => {
                return Err(format!("`return 1` ended as {ending:?}"));
            }
            Ok(FromCell::Fatal(text)) => return Err(text),
            Ok(FromCell::Event(_)) => {}
            Err(why) => return Err(format!("it sent {why}")),
        }
    }
    Err("no answer in time".to_owned())
}

/// The longest frame a cell may send for a run under `limits`: a line or a value fits the output
/// budget, a call's argument the memory budget (the cell checks both before it sends).
fn frame_limit(limits: &Limits) -> usize {
    let memory = usize::try_from(limits.memory_bytes()).unwrap_or(usize::MAX);
    limits.output_bytes().max(memory).saturating_add(64 << 10)
}

/// The cell's frames as the host reads them: a 4-byte length, then that many bytes.
///
/// Unlike `LengthDelimitedCodec`, nothing is reserved for the length a frame announces (the cell
/// chose it): the buffer grows only as bytes arrive. A frame that announces more than the limit,
/// or more than its run may still make the host hold, ends the run then, before its bytes are
/// read.
#[derive(Debug)]
struct CellFrames {
    max_frame_bytes: usize,
    /// The run's account, once a run has the cell.
    memory: HostMemory,
}

/// Why the cell's frames could not be read.
#[derive(Debug)]
enum CellFrameError {
    /// A frame announced more than the protocol's limit: a protocol violation.
    TooLong(usize),
    /// A frame announced more than the run may make the host hold.
    OverBudget,
    /// The channel failed (or ended in the middle of a frame).
    Io(std::io::Error),
}

impl From<std::io::Error> for CellFrameError {
    fn from(error: std::io::Error) -> Self {
        CellFrameError::Io(error)
    }
}

impl CellFrames {
    fn new(max_frame_bytes: usize) -> Self {
        Self { max_frame_bytes, memory: HostMemory::unlimited() }
    }
}

impl Decoder for CellFrames {
    type Item = BytesMut;
    type Error = CellFrameError;

    fn decode(&mut self, buffer: &mut BytesMut) -> Result<Option<BytesMut>, CellFrameError> {
        let Some(prefix) = buffer.get(..wire::LENGTH_BYTES) else { return Ok(None) };
        let mut length = [0u8; wire::LENGTH_BYTES];
        length.copy_from_slice(prefix);
        let length = u32::from_be_bytes(length) as usize;
        if length > self.max_frame_bytes {
            return Err(CellFrameError::TooLong(self.max_frame_bytes));
        }
        if length.saturating_add(wire::LENGTH_BYTES) > self.memory.room() {
            return Err(CellFrameError::OverBudget);
        }
        if buffer.len() < wire::LENGTH_BYTES + length {
            return Ok(None);
        }
        buffer.advance(wire::LENGTH_BYTES);
        Ok(Some(buffer.split_to(length)))
    }
}

/// The host's end of a new channel, the read end of the cell's standard error, and the cell's
/// descriptors: the channel's other end as fd 3, `/dev/null` as its input and output.
///
/// Only V8 writes to standard error, when it gives up in a way no handler sees ("Fatal
/// JavaScript invalid size error", a failed check). Both ends are non-blocking, so a cell that
/// writes more than the pipe holds loses the rest instead of waiting for a host that reads it
/// only once the cell is gone.
fn channel_and_io() -> std::io::Result<(std::os::unix::net::UnixStream, OwnedFd, CellIo)> {
    let (host_end, cell_end) = std::os::unix::net::UnixStream::pair()?;
    let null = || -> std::io::Result<OwnedFd> {
        Ok(std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?.into())
    };
    let (stderr_read, stderr_write) = code_runtime_sandbox::pipe(true)?;
    let io =
        CellIo { stdin: null()?, stdout: null()?, stderr: stderr_write, channel: cell_end.into() };
    Ok((host_end, stderr_read, io))
}

/// What V8 wrote to the cell's standard error (at most 64 KiB), once the cell is gone.
fn read_stderr(stderr: &OwnedFd) -> String {
    use std::io::Read;
    let mut bytes = Vec::new();
    if let Ok(file) = stderr.try_clone() {
        let _ = std::fs::File::from(file).take(64 << 10).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Why a cell died by itself, in what it wrote before: V8's own words (the line of its
/// `# Fatal error…` block that names the error, `# Fatal JavaScript invalid size error
/// 268435456`), or else the last line (the dynamic loader's, for an executable whose libraries
/// the cell does not have). Only V8 and the loader write there: a program cannot.
fn fatal_in(stderr: &str) -> Option<String> {
    let v8 = stderr
        .lines()
        .filter_map(|line| line.strip_prefix("# "))
        .rfind(|line| line.starts_with("Fatal ") || line.starts_with("Check failed"))
        .map(|line| format!("V8 fatal error: {}", line.trim()));
    v8.or_else(|| {
        let last = stderr.lines().map(str::trim).rfind(|line| !line.is_empty())?;
        Some(format!("the V8 cell failed: {last}"))
    })
}

/// A started cell waiting for a run's setup; used by one run at most.
pub(crate) struct Launched {
    process: WatchedCell,
    frames: FramedRead<OwnedReadHalf, CellFrames>,
    writer: OwnedWriteHalf,
    stderr: OwnedFd,
    /// What the cell was started with.
    limits: CellLimits,
    shape: Shape,
}

impl std::fmt::Debug for Launched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launched").field("pid", &self.process.cell().pid()).finish_non_exhaustive()
    }
}

impl Launched {
    /// Kills the cell and waits until it is reaped.
    async fn discard(mut self) {
        self.process.kill();
        self.process.reap().await;
    }

    fn run(mut self, program: Program, limits: Limits, memory: HostMemory) -> CellSubstrate {
        // What the cell used before the run (V8's initialisation) is not the program's.
        let cpu_before = self.process.cpu_used();
        self.frames.decoder_mut().memory = memory.clone();
        CellSubstrate {
            outbox: VecDeque::from([(wire::setup(&program), None)]),
            memory,
            parsing: None,
            over_budget: false,
            written: 0,
            writable: true,
            process: self.process,
            frames: self.frames,
            writer: self.writer,
            stderr: self.stderr,
            cpu_before,
            limits,
            fatal: None,
            logs: Vec::new(),
            ended: false,
            seen: HashSet::new(),
        }
    }
}

/// One run's cell, seen from the host.
pub(crate) struct CellSubstrate {
    process: WatchedCell,
    frames: FramedRead<OwnedReadHalf, CellFrames>,
    writer: OwnedWriteHalf,
    stderr: OwnedFd,
    /// Frames to the cell, written by `poll_event` as the socket takes them (never awaited in
    /// place, so a cell that stops reading cannot stall the host loop); `written` bytes of the
    /// first are out. Each answer holds its charge of the run's host memory until written.
    outbox: VecDeque<(Vec<u8>, Option<Held>)>,
    /// The run's account of what the host holds because of the program.
    memory: HostMemory,
    /// A long frame being parsed off the host loop, with the charge of its bytes; later frames
    /// wait for it, in order.
    parsing: Option<(tokio::task::JoinHandle<Parsed>, Held)>,
    /// Set when an answer could not be queued within the memory budget: the run ends.
    over_budget: bool,
    written: usize,
    writable: bool,
    cpu_before: Duration,
    limits: Limits,
    /// The cell's last words, once it sent them.
    fatal: Option<String>,
    /// Lines read while draining at teardown.
    logs: Vec<String>,
    /// Whether the cell sent its ending (its last frame: nothing is left to read).
    ended: bool,
    /// The calls the cell made.
    seen: HashSet<CallId>,
}

impl Substrate for CellSubstrate {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if let Some(event) = self.poll_memory(cx) {
            return Poll::Ready(event);
        }
        if self.over_budget {
            return Poll::Ready(self.host_memory_spent());
        }
        self.poll_write(cx);
        match self.poll_frames(cx) {
            Some(event) => Poll::Ready(event),
            None => Poll::Pending,
        }
    }

    fn settle(&mut self, call: CallId, outcome: Result<JsonValue, BindingError>) {
        if !self.writable {
            return;
        }
        // The answer waits on the host until the cell reads it.
        let frame = wire::settle(call, outcome);
        match self.memory.hold(frame.len()) {
            Ok(held) => self.outbox.push_back((frame, Some(held))),
            Err(_) => self.over_budget = true,
        }
    }

    fn compute_used(&self) -> Duration {
        self.process.cpu_used().saturating_sub(self.cpu_before)
    }

    fn stop(&mut self) {
        self.process.kill();
    }

    fn teardown(mut self, ending: Ending) -> BoxFuture<'static, Teardown> {
        Box::pin(async move {
            let channel_ended = matches!(ending, Ending::Exited(_));
            if channel_ended {
                // The cell is most likely gone and its init follows at once with its status.
                self.process.wait_exit(EXIT_GRACE).await;
            }
            self.process.kill();
            // What the cell wrote before it was stopped is still the program's output; the
            // channel ends as soon as its processes are dead. A cell that sent its ending wrote
            // nothing after it.
            if !channel_ended && !self.ended {
                self.drain().await;
            }
            let mut process = self.process;
            let logs = std::mem::take(&mut self.logs);
            if !channel_ended {
                let cleanup: BoxFuture<'static, ()> = Box::pin(async move {
                    process.reap().await;
                });
                return Teardown { ending, logs, cleanup: Some(cleanup) };
            }
            let exit = process.reap().await;
            let fatal = self.fatal.or_else(|| fatal_in(&read_stderr(&self.stderr)));
            let ending = refine(ending, exit, fatal, process.last_cpu(), &self.limits);
            Teardown::new(ending, logs)
        })
    }
}

impl CellSubstrate {
    /// The ending of a run that made the host hold more than its memory budget; the cell goes.
    fn host_memory_spent(&mut self) -> Event {
        self.process.kill();
        Event::Ended(Ending::Stopped(StopReason::HostMemory {
            max_memory_mb: self.limits.max_memory_mb,
        }))
    }

    /// Compares the whole cell's memory with the budget and V8's own needs when a look is due.
    /// V8's heap limit and the ArrayBuffer allocator hold the program to its budget inside the
    /// cell; this catches what they do not see (V8's own zones and tables, a
    /// `WebAssembly.Memory` when WebAssembly is allowed, a flat string V8 let past its limit).
    fn poll_memory(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        let budget = self.memory_budget();
        let Poll::Ready(used) = self.process.poll_over_memory(cx, budget) else { return None };
        Some(self.out_of_memory(used))
    }

    /// The whole cell's budget: the run's, and what V8 holds of its own (see
    /// [`CELL_OVERHEAD_BYTES`]).
    fn memory_budget(&self) -> u64 {
        self.limits.memory_bytes().saturating_add(CELL_OVERHEAD_BYTES)
    }

    /// The out-of-memory ending, when the cell holds more than its budget now.
    fn over_memory(&mut self) -> Option<Event> {
        let used = self.process.over_memory(self.memory_budget())?;
        Some(self.out_of_memory(used))
    }

    fn out_of_memory(&mut self, used: u64) -> Event {
        tracing::debug!(
            used,
            budget = self.memory_budget(),
            "the V8 cell is over its memory budget"
        );
        self.process.kill();
        Event::Ended(Ending::Stopped(StopReason::OutOfMemory {
            max_memory_mb: self.limits.max_memory_mb,
        }))
    }

    /// Writes queued frames as far as the socket takes them.
    fn poll_write(&mut self, cx: &mut Context<'_>) {
        while self.writable {
            let Some((frame, _)) = self.outbox.front() else { return };
            match Pin::new(&mut self.writer).poll_write(cx, &frame[self.written..]) {
                Poll::Ready(Ok(written)) if written > 0 => {
                    self.written += written;
                    if self.written == frame.len() {
                        self.outbox.pop_front();
                        self.written = 0;
                    }
                }
                // The cell closed its channel; its end shows on the read side.
                Poll::Ready(_) => {
                    self.writable = false;
                    self.outbox.clear();
                }
                Poll::Pending => return,
            }
        }
    }

    fn poll_frames(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        for _ in 0..FRAMES_PER_POLL {
            let parsed = match self.poll_parsed(cx) {
                Poll::Ready(Ok(Some(parsed))) => parsed,
                Poll::Ready(Ok(None)) => continue,
                Poll::Ready(Err(ending)) => return Some(Event::Ended(ending)),
                Poll::Pending => return None,
            };
            match parsed {
                // Each id is answered once; a repeated one (a compromised cell's) is ignored.
                Ok(FromCell::Event(Event::Call { id, .. })) if !self.seen.insert(id) => {}
                Ok(FromCell::Event(Event::Call { id, function, args })) => {
                    // The argument stays on the host while the call waits and runs.
                    let args = args.into_value();
                    return Some(match self.memory.hold(json::held_bytes(&args)) {
                        Ok(held) => {
                            Event::Call { id, function, args: BindingArgs::held(args, held) }
                        }
                        Err(_) => self.host_memory_spent(),
                    });
                }
                Ok(FromCell::Event(Event::Ended(ending))) => {
                    self.ended = true;
                    // One last look: a program that grew past the budget between two looks and
                    // ended before the next one did not end within it.
                    return Some(match self.over_memory() {
                        Some(out_of_memory) => out_of_memory,
                        None => Event::Ended(ending),
                    });
                }
                Ok(FromCell::Event(event)) => return Some(event),
                Ok(FromCell::Fatal(text)) => self.fatal = Some(text),
                Err(Unread::TooLarge) => return Some(self.host_memory_spent()),
                Err(Unread::Malformed(why)) => {
                    return Some(Event::Ended(Ending::Failed(format!(
                        "protocol violation: {why}"
                    ))));
                }
            }
        }
        // More may be waiting; come back after the loop's other branches had their turn.
        cx.waker().wake_by_ref();
        None
    }

    /// The next frame: one being parsed off the loop when it is done, else the next one read (a
    /// short one parsed here; a long one handed to a blocking thread, `Ok(None)` meanwhile).
    /// `Err` is how the channel ended.
    fn poll_parsed(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Parsed>, Ending>> {
        if let Some((parsing, _held)) = &mut self.parsing {
            let joined = std::task::ready!(Pin::new(parsing).poll(cx));
            // The frame's charge goes with it; its values are charged as they are kept.
            self.parsing = None;
            let parsed = joined.unwrap_or_else(|_| Err(Unread::Malformed("a lost parse".into())));
            return Poll::Ready(Ok(Some(parsed)));
        }
        let payload = match self.frames.poll_next_unpin(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(payload))) => payload,
            Poll::Ready(Some(Err(CellFrameError::TooLong(limit)))) => {
                return Poll::Ready(Err(Ending::Failed(format!(
                    "protocol violation: a frame longer than {limit} bytes"
                ))));
            }
            Poll::Ready(Some(Err(CellFrameError::OverBudget))) => {
                self.process.kill();
                return Poll::Ready(Err(Ending::Stopped(StopReason::HostMemory {
                    max_memory_mb: self.limits.max_memory_mb,
                })));
            }
            Poll::Ready(Some(Err(CellFrameError::Io(error)))) => {
                tracing::debug!(%error, "the V8 cell's channel failed");
                return Poll::Ready(Err(Ending::Exited(None)));
            }
            Poll::Ready(None) => return Poll::Ready(Err(Ending::Exited(None))),
        };
        // The payload is held while it is parsed: what its values may take is what is left.
        let Ok(held) = self.memory.hold(payload.len()) else {
            return Poll::Ready(Ok(Some(Err(Unread::TooLarge))));
        };
        let (len, room, max_memory_mb) =
            (payload.len(), self.memory.room(), self.limits.max_memory_mb);
        let parse = move || wire::from_cell_within(&payload, max_memory_mb, room);
        if len <= INLINE_PARSE_BYTES {
            return Poll::Ready(Ok(Some(parse())));
        }
        match reactor::handle() {
            Ok(reactor) => {
                self.parsing = Some((reactor.spawn_blocking(parse), held));
                Poll::Ready(Ok(None))
            }
            Err(_) => Poll::Ready(Ok(Some(parse()))),
        }
    }

    /// Reads the lines a killed cell wrote before it died, until its channel ends.
    async fn drain(&mut self) {
        let deadline = tokio::time::Instant::now() + DRAIN_WITHIN;
        loop {
            let next = reactor::enter(|| tokio::time::timeout_at(deadline, self.frames.next()));
            match next.await {
                Ok(Some(Ok(payload))) => {
                    let room = self.memory.room();
                    if let Ok(FromCell::Event(Event::Log(line))) =
                        wire::from_cell_within(&payload, self.limits.max_memory_mb, room)
                    {
                        self.logs.push(line);
                    }
                }
                Ok(_) | Err(_) => return,
            }
        }
    }
}

/// An ending the loop could only guess at ([`Ending::Exited`]), made exact: V8's last words (its
/// fatal frame, or what it wrote to standard error before it crashed), the CPU limit's signals,
/// or the cell's exit code.
fn refine(
    ending: Ending,
    exit: Option<CellExit>,
    fatal: Option<String>,
    cpu_used: Duration,
    limits: &Limits,
) -> Ending {
    let Ending::Exited(_) = ending else { return ending };
    if let Some(text) = fatal {
        return Ending::Failed(text);
    }
    let code = exit.and_then(CellExit::status);
    let budget = Duration::from_millis(limits.compute_ms);
    if exit.is_some_and(|exit| exit.by_cpu_limit(cpu_used, budget)) {
        return Ending::Stopped(StopReason::Compute { compute_ms: limits.compute_ms });
    }
    Ending::Exited(code)
}

//! The host side of `process` isolation: every run's isolate lives in a sandbox cell of its own
//! (a process started from the cell executable, see `cell.rs`), driven over the cell's channel as
//! the host loop's [`Substrate`].
//!
//! What the cell adds to `thread` isolation: a V8 fatal error ends the cell, not the host; the
//! compute budget counts every thread of the cell (V8's own included); the cell's memory is
//! watched as a whole; and the program's V8 sees no file, no network and no other process.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runtime::Limits;
use code_runtime::provider::{Answer, BindingTable, CallId, Ending, Event, HostMemory, Spare};
use code_runtime_cell::{
    Callee, CellRun, CellSubstrate, Framing, Incoming, Launch, Launched, Protocol, Stream, Unread,
};
use code_runtime_sandbox::{CellLimits, CellPlan, CellSpec, Containment};

use crate::config::WorkerThreadConfig;
use crate::program::{Program, Shape};
use crate::wire::{self, FromCell};
use crate::{WorkerThreadError, cell};

/// What a cell may hold beyond the run's memory budget before the host stops it: V8's own
/// memory outside its heap (its isolate, compiler zones, code, the platform threads' stacks) and
/// room for the heap limit's one extension to begin (see `memory.rs`). Measured: a cell whose
/// program waits on a call holds 2 MB of anonymous memory (`Pss_Anon`, release build; 3.2 MB
/// when a cell executed the cell executable rather than being a copy of the spawner process);
/// its executable's pages are files, not counted. A program that grows past this ends as the in-cell
/// limits would have ended it: out of memory (a 128 MiB string flattened under a 64 MB budget,
/// which the heap limit's extension let through, included).
const CELL_OVERHEAD_BYTES: u64 = 32 << 20;

/// The address space of each of the cell's processes, beyond twice the memory budget. V8
/// reserves far more address space than it uses: an idle cell maps 17 GB and peaks at 50 GB
/// while it starts (the C++ heap's cage is reserved at twice its size to align it), so this
/// limit is no memory budget, only a ceiling; the budget is held by V8's heap limit, the
/// ArrayBuffer allocator and the host's look at the whole cell's resident memory.
const CELL_ADDRESS_SPACE_BYTES: u64 = 64 << 30;

/// How long construction waits for a trial cell to run `return 1`.
const CHECK_WITHIN: Duration = Duration::from_secs(20);

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
        let mut launcher = Launcher { plan, executable, limits: config.limits, shape };
        if !trusted {
            launcher.check()?;
        }
        // Only an executable known to serve cells is started as their spawner process.
        if config.spawner_process {
            let args = vec![launcher.executable.clone().into_os_string(), cell::SPAWNER_ARG.into()];
            launcher.plan = launcher.plan.with_spawner_process(args);
        }
        let launcher = Arc::new(launcher);
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
    /// isolate is made already), else a new one. The program's strip took `stripped` of the
    /// host's CPU time, which the run's compute budget pays.
    pub(crate) async fn start(
        &self,
        shape: Shape,
        program: Program,
        stripped: Duration,
        run: (Limits, HostMemory, Arc<BindingTable>),
    ) -> Result<CellSubstrate<V8Protocol>, Ending> {
        let (limits, memory, table) = run;
        let wanted = cell_limits(&limits);
        let launcher = &self.launcher;
        let default = (wanted, shape) == (cell_limits(&launcher.limits), launcher.shape);
        let launch = launcher.launch(&limits, shape);
        let mut launched =
            code_runtime_cell::take_or_launch(&self.spare, default, &wanted, launch).await?;
        let (_, stderr) = launched.take_streams();
        let run = CellRun {
            limits,
            memory,
            table,
            overhead_bytes: CELL_OVERHEAD_BYTES,
            prepaid: stripped,
            first: vec![wire::setup(&program)],
            max_frame_bytes: None,
        };
        Ok(launched.run(V8Protocol { stderr, fatal: None }, run))
    }

    /// Ends the spare cells and the spawner process before returning.
    pub(crate) async fn close(&self) {
        self.spare.close().await;
        self.launcher.plan.close().await;
    }
}

/// The cell's limits for a run under `limits` (see [`code_runtime_cell::cell_limits`]), with
/// V8's address space.
fn cell_limits(limits: &Limits) -> CellLimits {
    CellLimits {
        memory_bytes: limits
            .memory_bytes()
            .saturating_mul(2)
            .saturating_add(CELL_ADDRESS_SPACE_BYTES),
        // Nothing in a V8 cell writes files: its `/tmp` only needs to exist.
        file_bytes: 1 << 20,
        ..code_runtime_cell::cell_limits(limits)
    }
}

impl Launcher {
    /// Starts a cell and tells it what its isolate is made with; it makes the isolate while it
    /// waits for a run's setup.
    async fn launch(&self, limits: &Limits, shape: Shape) -> Result<Launched, Ending> {
        code_runtime_cell::launch(Launch {
            origin: code_runtime_cell::Origin::Plan(&self.plan),
            limits: cell_limits(limits),
            stdout: Stream::Null,
            // Only V8 writes there (see `V8Protocol::last_words`); non-blocking, so a cell that
            // writes more than the pipe holds loses the rest instead of waiting for a host that
            // reads it only once the cell is gone.
            stderr: Stream::Pipe { nonblocking: true },
            first: &wire::prepare(shape),
            framing: Framing::LengthPrefixed,
            max_frame_bytes: frame_limit(limits),
            what: "the V8 cell",
        })
        .await
    }

    /// Runs `return 1` in a cell as a run would, synchronously: an executable that does not
    /// serve cells, or a cell that cannot start V8, is found at construction, not in every run.
    fn check(&self) -> Result<(), WorkerThreadError> {
        let invalid =
            |why: String| WorkerThreadError::Cell { executable: self.executable.clone(), why };
        let channel = code_runtime_cell::channel(Stream::Null, Stream::Pipe { nonblocking: true })
            .map_err(|error| invalid(format!("cannot start a cell: {error}")))?;
        let (host_end, io, stderr) = (channel.host_end, channel.io, channel.stderr);
        let limits = Limits { compute_ms: CHECK_WITHIN.as_millis() as u64, ..self.limits };
        let mut running = futures::executor::block_on(self.plan.start(io, cell_limits(&limits)))
            .map_err(|error| invalid(error.to_string()))?;
        let outcome = trial_run(&host_end);
        running.kill();
        drop(host_end);
        let exit = running.wait_timeout(CHECK_WITHIN);
        outcome.map_err(|why| {
            let stderr = stderr.as_ref().map(read_stderr).unwrap_or_default();
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
        positions: Default::default(),
        parameters: vec!["console".to_owned()],
        namespaces: Vec::new(),
        globals: Vec::new(),
        tools: None,
        max_output_bytes: 1024,
        determinism: None,
        replay: Vec::new(),
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

/// The protocol of a V8 cell's channel (`wire.rs`), and what V8 said of the cell's death.
pub(crate) struct V8Protocol {
    /// The read end of the cell's standard error.
    stderr: Option<OwnedFd>,
    /// The cell's last words, once it sent them.
    fatal: Option<String>,
}

impl Protocol for V8Protocol {
    type Frame = FromCell;
    const DRAINS_CHANNEL: bool = true;

    fn parse(frame: &[u8], room: usize, limits: &Limits) -> Result<Option<FromCell>, Unread> {
        match wire::from_cell_within(frame, limits.max_memory_mb, room) {
            Ok(frame) => Ok(Some(frame)),
            Err(wire::Unread::TooLarge) => Err(Unread::TooLarge),
            Err(wire::Unread::Malformed(why)) => Err(Unread::Malformed(why)),
        }
    }

    fn on_frame(&mut self, frame: FromCell, _: &mut Vec<Vec<u8>>) -> Incoming {
        match frame {
            FromCell::Event(Event::Log(line)) => Incoming::Log(line),
            FromCell::Event(Event::Call { id, function, args }) => Incoming::Call {
                id,
                callee: Callee::Id(function),
                args: args.into_value(),
                replayed: false,
            },
            FromCell::Event(Event::Replayed { id, function, args }) => Incoming::Call {
                id,
                callee: Callee::Id(function),
                args: args.into_value(),
                replayed: true,
            },
            FromCell::Event(Event::Ended(ending)) => Incoming::Ended(ending),
            FromCell::Fatal(text) => {
                self.fatal = Some(text);
                Incoming::Nothing
            }
            // The wire makes no other event.
            FromCell::Event(_) => Incoming::Nothing,
        }
    }

    fn settle(&self, call: CallId, answer: Answer) -> Vec<u8> {
        wire::settle(call, answer)
    }

    /// V8's last words: its fatal frame, or what it wrote to standard error before it crashed.
    fn last_words(&mut self) -> Option<String> {
        self.fatal.take().or_else(|| fatal_in(&read_stderr(self.stderr.as_ref()?)))
    }
}

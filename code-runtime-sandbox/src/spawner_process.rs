//! The spawner process: a small process of the host's that starts the cells of one plan, so that
//! no cell is a copy of the host.
//!
//! A cell's init is a `clone` of the process that starts it, and its worker a `clone` of the
//! init: each copies the page tables of every private mapping, and until the worker executes
//! its program the host pays a copy-on-write fault for each page it writes. A host of a few MB
//! hardly notices; a Python host with this library's 65 MB extension loaded, or any host with a
//! large heap, pays milliseconds of CPU per cell (measured: 2 to 9 ms for the clone of a Python
//! host, against 1.3 ms for the command line's). The spawner process is the plan's own
//! executable, executed once with arguments that make it serve (`spawner_server.rs`): it plans the
//! same cells from the same [`CellSpec`] and starts each one the host asks for, as the host
//! would have, from a process of a few MB.
//!
//! It is no sandbox layer: it runs as the host's user, outside any cell, and only ever starts
//! cells of the plan the host gave it. Every cell is still one of the host's: the host holds
//! pidfds of its init and program, kills it, reads its usage; the spawner process reaps the init
//! and reports how it ended. The cells die with it (their parent-death signal), and it dies with
//! the host's spawner thread (its own), like every cell the host starts itself.
//!
//! It is a cell server (`cell_server.rs`): its hello carries the [`CellSpec`], from which it
//! plans the same cells as the host, and it answers with the layers they have; a spawner process
//! whose build, or whose machine's layers, differ from the host's is not used.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::SandboxError;
use crate::cell::{self, Cell};
use crate::cell_io::CellIo;
use crate::cell_server::{
    self, Answer, Asked, CONTROL_FD, Hello, SpawnerCell, WireSpec, ask_for_cell,
};
use crate::cell_spec::CellSpec;
use crate::message::{readable, receive, send, seqpacket, set_nonblocking};
use crate::plan::{CellLimits, Plan};

/// How long the spawner process may take to say it is ready: an `exec`, and without a machine
/// cache a probe of trial cells. Cells start in the host meanwhile.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// How long one cell may take to start (a clone, a fork and a few mounts: milliseconds).
const CELL_WITHIN: Duration = Duration::from_secs(5);

/// Spawner processes that died or never got ready, in a row, before the host stops starting
/// new ones for this plan.
const MAX_FAILURES: u32 = 3;

/// The spawner process of one plan, as the host sees it: started on the first cell, used from
/// the first cell after it said it is ready, started again when it dies.
#[derive(Debug)]
pub(crate) struct SpawnerProcess {
    spec: CellSpec,
    /// The argument vector that makes the plan's executable serve as a spawner process.
    args: Vec<OsString>,
    state: Mutex<State>,
}

#[derive(Debug)]
enum State {
    /// None runs: the next cell starts one (and starts in the host itself).
    Idle {
        failures: u32,
    },
    /// Started, not yet ready: cells start in the host.
    Starting {
        process: Process,
        since: Instant,
        failures: u32,
    },
    Running {
        process: Process,
        failures: u32,
    },
    /// It failed [`MAX_FAILURES`] times in a row, or refused the plan: cells start in the host.
    GivenUp,
}

/// A running spawner process: the child, and the host's end of its fd 3 (non-blocking).
#[derive(Debug)]
struct Process {
    child: Option<std::process::Child>,
    control: OwnedFd,
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            // The cells it started die with it; reaping it waits for that, off this thread.
            crate::spawner::detach(move || drop(child.wait()));
        }
    }
}

/// What came of a request for a cell.
enum Started {
    Cell(Cell),
    /// The spawner process cannot be asked (gone, or not ready): the host starts the cell.
    Unavailable,
}

/// A request's outcome, and whether the spawner process is of no more use (gone, or stuck).
struct Outcome {
    started: Result<Started, SandboxError>,
    broken: bool,
}

impl SpawnerProcess {
    pub(crate) fn new(spec: CellSpec, args: Vec<OsString>) -> Self {
        Self { spec, args, state: Mutex::new(State::Idle { failures: 0 }) }
    }

    /// Starts a cell of `plan` in the spawner process; `None` when it cannot be asked now (then
    /// the caller starts the cell itself; `io` is still whole). Blocking: on the spawner thread,
    /// whose thread the spawner process's parent-death signal follows.
    pub(crate) fn start(
        &self,
        plan: &Arc<Plan>,
        io: &CellIo,
        limits: &CellLimits,
    ) -> Result<Option<Cell>, SandboxError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let current = std::mem::replace(&mut *state, State::GivenUp);
        let (next, started) = match current {
            State::GivenUp => (State::GivenUp, Ok(Started::Unavailable)),
            State::Idle { failures } => match self.launch() {
                Ok(process) => {
                    let since = Instant::now();
                    (State::Starting { process, since, failures }, Ok(Started::Unavailable))
                }
                Err(_) => (failed(failures), Ok(Started::Unavailable)),
            },
            State::Starting { process, since, failures } => match hello_reply(&process, plan) {
                Reply::Pending if since.elapsed() < READY_WITHIN => {
                    (State::Starting { process, since, failures }, Ok(Started::Unavailable))
                }
                Reply::Pending | Reply::Gone => (failed(failures), Ok(Started::Unavailable)),
                Reply::Refused => (State::GivenUp, Ok(Started::Unavailable)),
                Reply::Ready => {
                    let outcome = request(&process, plan, io, limits);
                    (after(process, failures, &outcome), outcome.started)
                }
            },
            State::Running { process, failures } => {
                let outcome = request(&process, plan, io, limits);
                (after(process, failures, &outcome), outcome.started)
            }
        };
        *state = next;
        match started? {
            Started::Cell(cell) => Ok(Some(cell)),
            Started::Unavailable => Ok(None),
        }
    }

    /// Ends the spawner process (and with it every cell it started) and reaps it; no other
    /// starts after this. Blocking: on the spawner thread.
    pub(crate) fn close(&self) {
        let closed = std::mem::replace(
            &mut *self.state.lock().unwrap_or_else(PoisonError::into_inner),
            State::GivenUp,
        );
        let mut process = match closed {
            State::Starting { process, .. } | State::Running { process, .. } => process,
            State::Idle { .. } | State::GivenUp => return,
        };
        if let Some(mut child) = process.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Executes the plan's executable as a spawner process and says hello; does not wait for
    /// its answer.
    fn launch(&self) -> io::Result<Process> {
        use std::os::unix::process::CommandExt;
        let (control, child_end) = seqpacket()?;
        let (program, args) = self.args.split_first().ok_or(io::ErrorKind::InvalidInput)?;
        #[allow(
            clippy::disallowed_methods,
            reason = "the one process this crate starts outside a cell: the plan's own \
                      executable (which the host named, and every cell runs), to start cells; \
                      it runs no program"
        )]
        let mut command = std::process::Command::new(&self.spec.executable);
        command
            .arg0(program)
            .args(args)
            // Nothing of the host's environment: it needs none (the spec names every path), and
            // its cells' inits are copies of its memory. The working directory stays the host's,
            // against which a relative path of the spec means what it meant there.
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        let fd = child_end.as_raw_fd();
        // SAFETY: between fork and exec only async-signal-safe calls: dup2, fcntl and prctl on
        // the child's own descriptors and process.
        unsafe {
            command.pre_exec(move || {
                if fd == CONTROL_FD {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(io::Error::last_os_error());
                    }
                } else if libc::dup2(fd, CONTROL_FD) == -1 {
                    return Err(io::Error::last_os_error());
                }
                // It ends with the thread that starts it (the spawner thread, which lives as
                // long as the host), as the cells do.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        drop(child_end);
        let process = Process { child: Some(child), control };
        set_nonblocking(&process.control)?;
        let hello = cell_server::encode(&Hello::new(WireSpec::from(&self.spec)))?;
        send(process.control.as_fd(), &hello, &[])?;
        Ok(process)
    }
}

/// The state after a spawner process failed (to start, to get ready, or to answer).
fn failed(failures: u32) -> State {
    if failures + 1 >= MAX_FAILURES {
        State::GivenUp
    } else {
        State::Idle { failures: failures + 1 }
    }
}

/// The state after a request: the same process, unless it is of no more use.
fn after(process: Process, failures: u32, outcome: &Outcome) -> State {
    if outcome.broken {
        // Dropped: killed and reaped; the next cell starts a new one.
        drop(process);
        return failed(failures);
    }
    let failures = if outcome.started.is_ok() { 0 } else { failures };
    State::Running { process, failures }
}

enum Reply {
    Pending,
    Ready,
    /// It plans other cells, or speaks another protocol: not to be used.
    Refused,
    Gone,
}

/// The spawner process's answer to the hello, if it came.
fn hello_reply(process: &Process, plan: &Plan) -> Reply {
    if !readable(&process.control, 0) {
        return Reply::Pending;
    }
    let Ok((message, _)) = receive(process.control.as_fd(), 0) else { return Reply::Gone };
    if message.is_empty() {
        return Reply::Gone;
    }
    match cell_server::decode::<Answer>(&message) {
        Ok(answer) if answer.accepts(Some(plan.containment)) => Reply::Ready,
        _ => Reply::Refused,
    }
}

/// Asks the spawner process for a cell and waits for it.
fn request(process: &Process, plan: &Arc<Plan>, io: &CellIo, limits: &CellLimits) -> Outcome {
    let failed = |step, source, broken| Outcome {
        started: Err(SandboxError::Start { step, source }),
        broken,
    };
    let request = SpawnerCell { limits: *limits, outer: cell::next_outer_id() };
    let asked = match ask_for_cell(&process.control, &request, io, CELL_WITHIN) {
        Ok(asked) => asked,
        Err(error) => return failed("creating a socket", error, false),
    };
    // Once the request is sent the spawner process may have started a cell on `io`: a failure
    // is this run's, never a second cell on the same descriptors.
    match asked {
        Asked::Ready { init, worker, report } => {
            let cell = Cell::forked(plan.clone(), init, worker, report, false);
            Outcome { started: Ok(Started::Cell(cell)), broken: false }
        }
        // Gone, or so stuck that its socket is full: nothing was started with these, so the
        // host starts this cell itself.
        Asked::NotSent(_) => Outcome { started: Ok(Started::Unavailable), broken: true },
        Asked::TimedOut => {
            failed("waiting for the spawner process", io::ErrorKind::TimedOut.into(), true)
        }
        Asked::Failed(why) => {
            failed("starting a cell in the spawner process", io::Error::other(why), false)
        }
        Asked::Gone => failed(
            "starting a cell in the spawner process",
            io::Error::other("the spawner process ended first"),
            true,
        ),
        Asked::Broken(why) => {
            failed("finding the spawner process's cell", io::Error::other(why), true)
        }
        // The cell ended (and its init was reaped) before the host looked: this run's failure,
        // and no reason to end the spawner process, whose other cells run on.
        Asked::Ended => failed(
            "finding the spawner process's cell",
            io::Error::other("it ended at once"),
            false,
        ),
    }
}

//! [`Zygote`]: a fork server in a cell of its own, whose forks become the cells of a plan.
//!
//! Starting an interpreter costs more than everything else a cell's start does (a CPython is
//! ten times a fork). A zygote is a cell whose program has done that start once and then serves
//! forks: each fork enters namespaces of its own (user, nested in the zygote's; mount, with its
//! own `/tmp`, `/dev/shm` and `/proc`; pid, with an init of its own; ipc; uts; network), and
//! applies the plan's layers (capabilities dropped, `no_new_privs`, rlimits, Landlock, the
//! seccomp filter) before the first byte of a program. The host then holds it as a [`Cell`] like
//! any other: kill, whole-cell usage, exit status.
//!
//! The zygote itself runs with fewer layers than its children: its seccomp filter lets it
//! `clone` into new namespaces and `mount` (each run's init is such a clone and mounts the run's
//! `/tmp` and `/proc`; the program's process installs the full filter on top), and it has
//! no Landlock (a Landlock domain may not mount, and rules bind to inodes a fresh `/tmp` would
//! not have). It runs no program's code: it reads the host's requests and forks.
//!
//! The host speaks to it as to any cell server (`cell_server.rs`): the language's bootstrap and
//! a [`Recipe`] (the numbers, programs and rules of the forks' layers), then one request per cell.

use std::ffi::{CStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value as JsonValue, json};

use crate::cell::{self, Cell};
use crate::cell_io::CellIo;
use crate::cell_plan::CellPlan;
use crate::cell_server::{
    self, Answer, Asked, Hello, Hex, LandlockRecipe, Recipe, ZygoteCell, ask_for_cell,
};
use crate::message::{millis, readable, receive, send, seqpacket, set_nonblocking};
use crate::mounts::cstring;
use crate::plan::{CELL_ID, CellLimits, Plan, WorkerEnd};
use crate::{Containment, SandboxError};

/// How long a zygote may take to start (an interpreter's start, on a busy machine).
const START_WITHIN: Duration = Duration::from_secs(20);

/// How long a fork may take to be ready (a clone, a fork and a few mounts: milliseconds).
const FORK_WITHIN: Duration = Duration::from_secs(5);

/// A running zygote of one plan. Dropping it kills it, and with it every cell forked from it.
#[derive(Debug)]
pub struct Zygote {
    /// The zygote's own cell.
    cell: Mutex<Cell>,
    /// The host's end of the zygote's fd 3, non-blocking.
    control: OwnedFd,
    /// The plan of the children.
    children: Arc<Plan>,
    /// A fork found the zygote gone (its socket closed) or stuck (then killed): its cell may
    /// take a while to end and be reaped, and no fork should wait for that.
    gone: AtomicBool,
}

impl Zygote {
    /// Starts a zygote of `plan`'s cells: a cell of `plan` whose program is `args` (the same
    /// executable) with the zygote's layers, handed `first` and the recipe, and ready to fork.
    ///
    /// # Errors
    ///
    /// [`SandboxError::Unavailable`] for a plan without a user namespace (a zygote's forks make
    /// their own, nested in its); [`SandboxError::Start`] when the zygote does not start or does
    /// not say `ready` in time (with the last line it wrote on its standard error).
    pub async fn start(
        plan: &CellPlan,
        args: &[OsString],
        first: Vec<u8>,
    ) -> Result<Zygote, SandboxError> {
        let zygote = zygote_plan(&plan.plan, args)?;
        let children = plan.plan.clone();
        crate::spawner::run(move || start(zygote, children, &first)).await
    }

    /// Forks a cell with `io` as its program's descriptors and `limits`.
    ///
    /// # Errors
    ///
    /// [`SandboxError::Start`] with the step that failed; when the zygote itself is gone,
    /// [`is_alive`](Self::is_alive) then says so.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the cell is handed over kills it.
    pub async fn fork(
        self: &Arc<Self>,
        io: CellIo,
        limits: CellLimits,
    ) -> Result<Cell, SandboxError> {
        let zygote = self.clone();
        crate::spawner::run(move || zygote.fork_now(io, &limits)).await
    }

    /// Whether the zygote still runs (as far as the host knows: a fork that found it gone says
    /// so at once, before its cell has ended).
    pub fn is_alive(&self) -> bool {
        if self.gone.load(Ordering::Relaxed) {
            return false;
        }
        let mut cell = self.cell.lock().unwrap_or_else(PoisonError::into_inner);
        matches!(cell.try_wait(), Ok(None))
    }

    /// Marks the zygote gone and kills what is left of it.
    fn give_up(&self) {
        self.gone.store(true, Ordering::Relaxed);
        self.cell.lock().unwrap_or_else(PoisonError::into_inner).kill();
    }

    /// Ends the zygote, and with it every cell forked from it, and waits until it is reaped.
    pub async fn close(self: &Arc<Self>) {
        let zygote = self.clone();
        let reaped = crate::spawner::run(move || {
            let mut cell = zygote.cell.lock().unwrap_or_else(PoisonError::into_inner);
            cell.kill();
            cell.wait().map_err(|source| SandboxError::Start { step: "reaping the zygote", source })
        });
        if reaped.await.is_err() {
            // No spawner (shut down): killed here, reaped by the reaper when dropped.
            self.cell.lock().unwrap_or_else(PoisonError::into_inner).kill();
        }
    }

    /// The host pid of the zygote's cell's init.
    pub fn pid(&self) -> libc::pid_t {
        self.cell.lock().unwrap_or_else(PoisonError::into_inner).pid()
    }

    /// The layers of its cells.
    pub fn containment(&self) -> Containment {
        Containment { zygote: true, ..self.children.containment }
    }

    /// Sends the request and waits for the fork's report. Blocking: on the spawner thread.
    fn fork_now(&self, io: CellIo, limits: &CellLimits) -> Result<Cell, SandboxError> {
        let failed = |step, source| SandboxError::Start { step, source };
        let request = ZygoteCell {
            rlimits: crate::plan::rlimits(limits, self.children.containment.process_limit),
            tmp: text(&crate::mounts::tmp_options(limits.memory_bytes)?),
            work: text(&cell::work_dir(&self.children, None)?.0),
        };
        let asked = ask_for_cell(&self.control, &request, &io, FORK_WITHIN)
            .map_err(|error| failed("creating a socket", error))?;
        let (step, why) = match asked {
            // The zygote always sends the program's pidfd too: without it a kill would reach the
            // init alone.
            Asked::Ready { init, worker: Some(worker), report } => {
                return Ok(Cell::forked(self.children.clone(), init, Some(worker), report, true));
            }
            Asked::Ready { worker: None, .. } => {
                ("finding the zygote's cell", io::Error::other("it sent no pidfd of the program"))
            }
            Asked::Failed(why) => ("forking from the zygote", io::Error::other(why)),
            Asked::Broken(why) => ("finding the zygote's cell", io::Error::other(why)),
            Asked::Ended => ("finding the zygote's cell", io::Error::other("it ended at once")),
            // A full socket is a zygote that stopped reading, and one that takes this long is
            // stuck; a report socket that ends unsaid is one whose zygote is gone. Either way it
            // goes, so that the next run starts a new one instead of waiting here again (every
            // cell's start waits on this thread).
            Asked::NotSent(error) => {
                self.give_up();
                ("asking the zygote for a cell", error)
            }
            Asked::TimedOut => {
                self.give_up();
                ("waiting for the zygote's cell", io::ErrorKind::TimedOut.into())
            }
            Asked::Gone => {
                self.give_up();
                ("forking from the zygote", io::Error::other("the zygote ended first"))
            }
        };
        Err(failed(step, why))
    }
}

/// A zygote of `children`: its cell, the recipe sent, `ready` read. Blocking: on the spawner
/// thread.
fn start(zygote: Plan, children: Arc<Plan>, first: &[u8]) -> Result<Zygote, SandboxError> {
    let failed = |step, source| SandboxError::Start { step, source };
    let (control, cell_end) = seqpacket().map_err(|error| failed("creating a socket", error))?;
    let (stderr, stderr_end) =
        crate::cell_io::pipe(true).map_err(|error| failed("creating a pipe", error))?;
    let null = || -> io::Result<OwnedFd> {
        Ok(std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?.into())
    };
    let io = CellIo {
        stdin: null().map_err(|error| failed("opening /dev/null", error))?,
        stdout: null().map_err(|error| failed("opening /dev/null", error))?,
        stderr: stderr_end,
        channel: cell_end,
    };
    // Its own `/tmp` holds nothing: each fork mounts its own.
    let limits = CellLimits::new(1 << 20, u64::MAX);
    let mut cell =
        cell::start(&Arc::new(zygote), io, &limits, WorkerEnd::Execute, cell::next_outer_id())?;
    let hello = cell_server::encode(&Hello::new(recipe(&children)?))
        .map_err(|error| failed("starting the zygote", error))?;
    let init_fds: Vec<_> = crate::run_init::shared().into_iter().collect();
    let mut said = Vec::new();
    let sent = send(control.as_fd(), first, &[])
        .and_then(|()| send(control.as_fd(), &hello, &init_fds))
        .map(|()| readable(&control, millis(START_WITHIN)))
        .and_then(
            |ready| if ready { receive(control.as_fd(), 0) } else { Ok((Vec::new(), Vec::new())) },
        )
        .map(|(message, _)| said = message);
    let answer = cell_server::decode::<Answer>(&said);
    if sent.is_err() || !answer.as_ref().is_ok_and(|answer| answer.accepts(None)) {
        cell.kill();
        let _ = cell.wait();
        let last = last_line(&stderr).unwrap_or_else(|| match sent {
            Err(error) => error.to_string(),
            Ok(()) if said.is_empty() => "it did not say ready".to_owned(),
            Ok(()) => match answer {
                Ok(Answer::Failed { why }) => why.chars().take(200).collect(),
                Ok(Answer::Ready { build, .. }) => format!("a zygote of another build ({build})"),
                Err(why) => why,
            },
        });
        return Err(failed("starting the zygote", io::Error::other(last)));
    }
    set_nonblocking(&control).map_err(|error| failed("starting the zygote", error))?;
    Ok(Zygote { cell: Mutex::new(cell), control, children, gone: AtomicBool::new(false) })
}

/// The plan of a zygote of `children`: the same root, namespaces and program file, `args` as
/// its command line, no Landlock, the zygote's seccomp filter, the host's resource limits.
fn zygote_plan(children: &Plan, args: &[OsString]) -> Result<Plan, SandboxError> {
    let user = children.namespaces.as_ref().is_some_and(|namespaces| namespaces.user);
    if !user {
        return Err(SandboxError::Unavailable {
            missing: "user namespace".to_owned(),
            findings: "a zygote's forks make user namespaces nested in its own".to_owned(),
            hint: "start cells from scratch (no zygote)",
        });
    }
    Ok(Plan {
        namespaces: Some(crate::plan::Namespaces { user, hostname: c"cell".to_owned() }),
        steps: children.steps.clone(),
        landlock: None,
        seccomp: if children.seccomp.is_empty() {
            Vec::new()
        } else {
            crate::seccomp::programs(true)?
        },
        executable: children.executable.clone(),
        argv: args.iter().map(cstring).collect::<Result<_, _>>()?,
        containment: children.containment,
        zygote: true,
    })
}

/// The recipe of `plan`'s children (the protocol's hello).
fn recipe(plan: &Plan) -> Result<Recipe, SandboxError> {
    let landlock = plan.landlock.as_ref().map(|ruleset| {
        let (fs, net, scoped) = ruleset.handled();
        let rules = ruleset.rules.iter().map(|rule| (text(&rule.path), rule.access)).collect();
        LandlockRecipe { fs, net, scoped, rules }
    });
    let proc = plan.steps.iter().find_map(|step| match step {
        crate::mounts::Step::Proc { options, .. } => Some(text(options)),
        _ => None,
    });
    // A run's init is a clone of the zygote into namespaces of its own, with the zygote's parent
    // as its parent (the zygote cell's init reaps it).
    let clone = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWNET
        | libc::CLONE_PARENT
        | libc::SIGCHLD;
    let numbers = |value: JsonValue| -> Map<String, JsonValue> {
        match value {
            JsonValue::Object(map) => map,
            _ => Map::new(),
        }
    };
    Ok(Recipe {
        uid: CELL_ID,
        syscalls: numbers(json!({
            "clone": libc::SYS_clone,
            "close_range": libc::SYS_close_range,
            "capset": libc::SYS_capset,
            "landlock_create_ruleset": libc::SYS_landlock_create_ruleset,
            "landlock_add_rule": libc::SYS_landlock_add_rule,
            "landlock_restrict_self": libc::SYS_landlock_restrict_self,
            "seccomp": libc::SYS_seccomp,
        })),
        flags: numbers(json!({
            "clone": clone,
            "nosuid": libc::MS_NOSUID,
            "nodev": libc::MS_NODEV,
            "noexec": libc::MS_NOEXEC,
            "bind": libc::MS_BIND,
            "set_dumpable": libc::PR_SET_DUMPABLE,
            "set_name": libc::PR_SET_NAME,
            "rlimit_as": libc::RLIMIT_AS,
            "set_pdeathsig": libc::PR_SET_PDEATHSIG,
            "sigkill": libc::SIGKILL,
            "set_no_new_privs": libc::PR_SET_NO_NEW_PRIVS,
            "capbset_drop": libc::PR_CAPBSET_DROP,
            "cap_ambient": libc::PR_CAP_AMBIENT,
            "cap_ambient_clear_all": libc::PR_CAP_AMBIENT_CLEAR_ALL,
            "o_path": libc::O_PATH,
            "seccomp_set_mode_filter": libc::SECCOMP_SET_MODE_FILTER,
        })),
        seccomp: plan.seccomp.iter().map(|program| Hex(crate::seccomp::bytes(program))).collect(),
        landlock,
        proc,
    })
}

fn text(string: &CStr) -> String {
    string.to_string_lossy().into_owned()
}

/// The last line of what is in the (non-blocking) pipe `read`.
fn last_line(read: &OwnedFd) -> Option<String> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // SAFETY: reading into a buffer we own.
        let got = unsafe { libc::read(read.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
        if got <= 0 || bytes.len() > 1 << 20 {
            break;
        }
        bytes.extend_from_slice(&chunk[..got as usize]);
    }
    let text = String::from_utf8_lossy(&bytes);
    text.lines().rev().find(|line| !line.trim().is_empty()).map(str::to_owned)
}

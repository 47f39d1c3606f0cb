//! [`Cell`]: one running cell seen from the host (its init's pidfd, its exit, its whole-cell
//! usage), and how one is started.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::cell_io::{CellExit, CellIo, pipe};
use crate::child::{self, MOUNT_STEPS, Stage};
use crate::message::{millis, readable};
use crate::plan::{CELL_ID, CellLimits, Fds, Maps, Plan, Spawn, WorkerEnd};
use crate::usage::{Usage, children};
use crate::{Containment, SandboxError};

/// A running cell. Dropping it kills the cell; reaping it then happens on the reaper thread.
#[derive(Debug)]
pub struct Cell {
    pidfd: OwnedFd,
    pid: libc::pid_t,
    /// The program's first process (the worker), so a kill stops it at once rather than when
    /// the dying init gets to it: nothing it writes after the host ended the run gets out.
    worker: Option<OwnedFd>,
    plan: Arc<Plan>,
    /// The work directory on the host's file system, without namespaces; removed with the cell.
    host_work_dir: Option<PathBuf>,
    exit: Option<CellExit>,
    /// The host killed the cell while its init ran. The init may still exit on its own in the
    /// window between the worker's kill and its own (reporting `128 + SIGKILL` for the worker):
    /// the exit is reported as [`CellExit::Killed`] either way, so a host kill never reads as
    /// the program's status (a CPU-limit kill, say).
    killed_by_host: bool,
    /// Counts the cell in [`cells_alive`] until its init is reaped.
    alive: Option<Alive>,
    /// A cell started by another process, a zygote (`zygote.rs`) or the spawner process
    /// (`spawner_process.rs`): its init is no child of the host's, so the other side reaps it
    /// and reports the program's status on this socket.
    report: Option<OwnedFd>,
    /// Forked from a zygote (see [`Containment::zygote`]).
    zygote: bool,
}

/// How many cells of this process have an init not yet reaped: started, running, or ended and
/// waiting for the reaper. A host exports it (a gauge in `code-runtime mcp`'s `/metrics`).
pub fn cells_alive() -> usize {
    ALIVE.load(std::sync::atomic::Ordering::Relaxed)
}

static ALIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One cell counted in [`cells_alive`], for as long as it lives.
#[derive(Debug)]
struct Alive;

impl Alive {
    fn count() -> Self {
        ALIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        ALIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Cell {
    /// The init's pidfd: readable once the cell has ended.
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// The init's pid, as the host sees it.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// The layers that hold for this cell.
    pub fn containment(&self) -> Containment {
        Containment { zygote: self.zygote, ..self.plan.containment }
    }

    /// Ends the cell: kills the program and the init, and with it (in a PID namespace) every
    /// process of the cell. Idempotent.
    pub fn kill(&mut self) {
        // An init that already ended holds the program's status (a host waits for it on
        // purpose, to read it): the kill has nothing to end and does not replace that status.
        if self.exit.is_some() || self.killed_by_host || self.has_ended() {
            return;
        }
        self.killed_by_host = true;
        for pidfd in self.worker.iter().chain([&self.pidfd]) {
            // SAFETY: pidfd_send_signal on a pidfd we own; no siginfo. A pidfd cannot reach a
            // recycled pid.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<u8>(),
                    0u32,
                )
            };
        }
    }

    /// Whether the init has ended (reaped or not), without reaping it.
    fn has_ended(&self) -> bool {
        if self.report.is_some() {
            return readable(&self.pidfd, 0);
        }
        wait(&self.pidfd, libc::WNOHANG | libc::WNOWAIT).is_ok_and(|exit| exit.is_some())
    }

    /// How the init ended, waiting for it with `block`; reaps a child of the host.
    fn ended(&self, block: bool) -> io::Result<Option<CellExit>> {
        let Some(report) = &self.report else {
            return wait(&self.pidfd, if block { 0 } else { libc::WNOHANG });
        };
        if !readable(&self.pidfd, if block { -1 } else { 0 }) {
            return Ok(None);
        }
        // A zygote's init wrote the status before it exited (a killed one wrote none); the
        // spawner process writes it once it has reaped the init, a moment after the pidfd said
        // it ended. Either closes the socket when it has nothing to say, so this wait is short
        // but when the other side is stuck.
        readable(report, millis(REPORT_WITHIN));
        let exit = reported_exit(report);
        Ok(Some(exit.unwrap_or(CellExit::Killed(libc::SIGKILL))))
    }

    /// Reaps the cell if it has ended.
    ///
    /// # Errors
    ///
    /// What `waitid` reports (not for a cell that is still running).
    pub fn try_wait(&mut self) -> io::Result<Option<CellExit>> {
        if let Some(exit) = self.exit {
            return Ok(Some(exit));
        }
        let exit = self.ended(false)?.map(|exit| self.reaped(exit));
        Ok(exit)
    }

    /// Waits for the cell to end and reaps it. Blocks the calling thread: an async host waits
    /// for [`pidfd`](Self::pidfd) to become readable instead, then calls
    /// [`try_wait`](Self::try_wait).
    ///
    /// # Errors
    ///
    /// What `waitid` reports.
    pub fn wait(&mut self) -> io::Result<CellExit> {
        if let Some(exit) = self.exit {
            return Ok(exit);
        }
        let exit = self.ended(true)?.ok_or_else(|| io::Error::other("waitid found no exit"))?;
        Ok(self.reaped(exit))
    }

    /// Waits up to `within` for the cell to end, blocking this thread (for synchronous
    /// callers: a construction-time check, say); `None` if it is still running.
    pub fn wait_timeout(&mut self, within: Duration) -> Option<CellExit> {
        let deadline = std::time::Instant::now() + within;
        loop {
            match self.try_wait() {
                Ok(Some(exit)) => return Some(exit),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                _ => return None,
            }
        }
    }

    /// What the cell uses now: its processes found under its init through `/proc`.
    pub fn usage(&self) -> Usage {
        if self.exit.is_some() {
            return Usage::default();
        }
        let tmp = self.tmp_bytes();
        let mut usage = crate::usage::of_processes_under(self.pid);
        usage.memory_bytes += tmp;
        usage.resident_bytes += tmp;
        usage
    }

    /// The memory the cell holds, exactly: for every process its proportional share (PSS) of
    /// the anonymous and shared-memory pages it maps, plus the files in the cell's `/tmp`.
    ///
    /// Shared anonymous mappings count (ten processes that each map 200 MB shared hold 2 GB,
    /// and `Usage::memory_bytes`, resident minus shared, sees none of it); pages several
    /// processes share (after a `fork`) count once in all; the files processes map from the
    /// read-only root (the interpreter, its libraries) do not. Reads each process's
    /// `/proc/<pid>/smaps_rollup`, which walks its page tables: dearer than [`usage`](Cell::usage),
    /// so look at that first (its `resident_bytes` bounds this from above).
    ///
    /// A process whose share cannot be read counts what `/proc/<pid>/statm` says instead: on a
    /// kernel without the `Pss_Anon` and `Pss_Shmem` lines, its private resident memory; where
    /// the file is not there to read (a zombie, or a process exiting, with no memory map left to
    /// walk: nothing; anything else: all it has resident, so what cannot be seen is never less).
    /// Only that process: a program that ends while its forks live on must not be charged every
    /// page they share as if each were its own.
    pub fn memory(&self) -> u64 {
        if self.exit.is_some() {
            return 0;
        }
        crate::usage::memory_of_processes_under(self.pid).saturating_add(self.tmp_bytes())
    }

    /// Bytes of files in the cell's `/tmp` (seen through a process of the cell).
    fn tmp_bytes(&self) -> u64 {
        if self.plan.namespaces.is_none() {
            return 0;
        }
        let Some(worker) = children(self.pid).first().copied() else { return 0 };
        let Ok(path) = CString::new(format!("/proc/{worker}/root/tmp")) else { return 0 };
        // SAFETY: statfs writes one struct we own.
        let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a struct to fill.
        if unsafe { libc::statfs(path.as_ptr(), &mut stat) } != 0 {
            return 0;
        }
        let used = (stat.f_blocks as u64).saturating_sub(stat.f_bfree as u64);
        used.saturating_mul(stat.f_bsize as u64)
    }

    /// Records the exit of the reaped init and removes the host work directory.
    fn reaped(&mut self, exit: CellExit) -> CellExit {
        let exit = if self.killed_by_host { CellExit::Killed(libc::SIGKILL) } else { exit };
        self.exit = Some(exit);
        self.alive = None;
        self.cleanup();
        exit
    }

    fn cleanup(&mut self) {
        if let Some(dir) = self.host_work_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Takes the host work directory (without namespaces) for the caller to remove, off the
    /// calling thread; `None` with namespaces (the cell's `/tmp` is gone with it).
    pub fn take_host_work_dir(&mut self) -> Option<PathBuf> {
        self.host_work_dir.take()
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        if self.exit.is_some() {
            return;
        }
        self.kill();
        if self.report.is_some() {
            // The zygote's cell reaps it.
            return;
        }
        let pidfd = match self.pidfd.try_clone() {
            Ok(pidfd) => pidfd,
            Err(_) => return,
        };
        let dir = self.host_work_dir.take();
        let alive = self.alive.take();
        // Reaping waits for the kernel to end every process of the cell: not on this thread.
        crate::spawner::detach(move || {
            let _ = wait(&pidfd, 0);
            drop(alive);
            if let Some(dir) = dir {
                let _ = std::fs::remove_dir_all(dir);
            }
        });
    }
}

/// How a cell started by another process ended, as it reported on `report` (a zygote's init,
/// or the spawner process); `None` when nothing was reported.
pub(crate) fn reported_exit(report: &OwnedFd) -> Option<CellExit> {
    loop {
        let (message, _) = crate::message::receive(report.as_fd(), 0).ok()?;
        if message.is_empty() {
            return None;
        }
        if let Some(crate::cell_server::Report::Ended(exit)) =
            crate::cell_server::Report::parse(&message)
        {
            return Some(exit);
        }
    }
}

/// How long the report of an ended cell started by another process may take to arrive.
const REPORT_WITHIN: Duration = Duration::from_secs(5);

impl Cell {
    /// A cell another process started (a zygote's fork, or the spawner process's) as the host's:
    /// its init's pidfd and host pid, its worker's pidfd, and the socket the program's status
    /// is reported on.
    pub(crate) fn forked(
        plan: Arc<Plan>,
        (pidfd, pid): (OwnedFd, libc::pid_t),
        worker: Option<OwnedFd>,
        report: OwnedFd,
        zygote: bool,
    ) -> Self {
        Self {
            pidfd,
            pid,
            worker,
            plan,
            host_work_dir: None,
            exit: None,
            killed_by_host: false,
            alive: Some(Alive::count()),
            report: Some(report),
            zygote,
        }
    }

    /// The program's first process (the worker), once the cell is ready.
    pub(crate) fn worker_pidfd(&self) -> Option<BorrowedFd<'_>> {
        self.worker.as_ref().map(AsFd::as_fd)
    }
}

/// `waitid` on a pidfd.
fn wait(pidfd: &OwnedFd, flags: libc::c_int) -> io::Result<Option<CellExit>> {
    // SAFETY: waitid writes one siginfo we own.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waitid on a pidfd we own.
        let waited = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED | flags,
            )
        };
        if waited == 0 {
            break;
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
    // SAFETY: reading the fields waitid filled.
    let (pid, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
    if pid == 0 {
        return Ok(None); // WNOHANG and still running.
    }
    Ok(Some(match code {
        libc::CLD_EXITED => CellExit::Exited(status),
        _ => CellExit::Killed(status),
    }))
}

/// `struct clone_args`, as far as `CLONE_ARGS_SIZE_VER2`.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// The outer uid of the next cell of a root host: each cell runs as a uid of its own, which no
/// account of the host has. The cells' count goes through a permutation keyed at random per
/// process, so consecutive cells get unrelated uids and no cell learns from its own how many the
/// host started; it is a permutation, so 2^24 cells in a row still get distinct ones.
pub(crate) fn next_outer_id() -> u32 {
    /// The first uid of the range cells use: far above any account's.
    const BASE: u32 = 0x6000_0000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    let key = KEY.get_or_init(std::collections::hash_map::RandomState::new);
    let count = NEXT.fetch_add(1, Ordering::Relaxed) % (1 << 24);
    BASE + permuted(count, key)
}

/// A keyed permutation of 24-bit numbers: four rounds of a Feistel network over two 12-bit
/// halves, the round function SipHash under `key`.
fn permuted(count: u32, key: &impl std::hash::BuildHasher) -> u32 {
    const HALF: u32 = (1 << 12) - 1;
    let (mut left, mut right) = (count >> 12 & HALF, count & HALF);
    for round in 0..4u32 {
        let mixed = (key.hash_one((round, right)) as u32) & HALF;
        (left, right) = (right, left ^ mixed);
    }
    left << 12 | right
}

/// Starts a cell of `plan` with `io`. Blocking; call it on the spawner thread (see
/// `spawner.rs`), or on the spawner process's only thread. `end` says what the worker does once
/// every layer is on (`WorkerEnd::Call` only in the spawner process, a single thread). `outer`
/// is the uid a root host maps the cell's user to (from [`next_outer_id`], which the host alone
/// calls, so that no two cells share one).
pub(crate) fn start(
    plan: &Arc<Plan>,
    io: CellIo,
    limits: &CellLimits,
    end: WorkerEnd,
    outer: u32,
) -> Result<Cell, SandboxError> {
    let start_error = |step, source| SandboxError::Start { step, source };
    let (report_read, report_write) =
        pipe(false).map_err(|error| start_error("creating a pipe", error))?;
    let (sync_read, sync_write) =
        pipe(false).map_err(|error| start_error("creating a pipe", error))?;
    // SAFETY: geteuid and getegid have no preconditions.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let root = euid == 0;
    let (work_dir, host_work_dir) = work_dir(plan, root.then_some(outer))?;
    let home = home_variable(&work_dir)?;
    let user_namespace = plan.namespaces.as_ref().is_some_and(|namespaces| namespaces.user);
    // Held until the clone has copied them.
    let detached = crate::mounts::detached_trees(&plan.steps);
    let trees: Vec<libc::c_int> =
        detached.iter().map(|tree| tree.as_ref().map_or(-1, AsRawFd::as_raw_fd)).collect();
    // Without a pid namespace the init sweeps its orphans itself: it stays what it is.
    let init_image = plan.namespaces.as_ref().and_then(|_| crate::run_init::shared()).unwrap_or(-1);
    let spawn = Spawn {
        fds: io.fds(&report_write, &sync_read),
        rlimits: plan.rlimits(limits),
        tmp_options: crate::mounts::tmp_options(limits.memory_bytes)?,
        held_trees: held(&trees),
        kept: held(&[trees.as_slice(), &[init_image]].concat()),
        init_image,
        trees,
        self_maps: (user_namespace && !root).then(|| Maps::of_cell_user(euid, egid)),
        identity: match (user_namespace, root) {
            (true, _) => Some((CELL_ID, CELL_ID)),
            (false, true) => Some((outer, outer)),
            (false, false) => None,
        },
        init_identity: user_namespace.then_some((CELL_ID, CELL_ID)),
        make_work_dir: host_work_dir.is_none(),
        work_dir,
        argv: plan.argv.iter().map(|arg| arg.as_ptr()).chain([std::ptr::null()]).collect(),
        // The string's bytes stay where they are when the `CString` moves into `Spawn`.
        envp: [home.as_ptr(), std::ptr::null()],
        _home: home,
        host_strings: crate::plan::HostStrings::of_this_process(),
        end,
    };
    let (pid, pidfd) = match clone_init(plan, &spawn) {
        Ok(cloned) => cloned,
        Err(error) => {
            remove(host_work_dir);
            return Err(start_error("cloning the cell", error));
        }
    };
    drop((report_write, sync_read, io, detached));
    let mut cell = Cell {
        pidfd,
        pid,
        worker: None,
        plan: plan.clone(),
        host_work_dir,
        exit: None,
        killed_by_host: false,
        alive: Some(Alive::count()),
        report: None,
        zygote: false,
    };
    if user_namespace && root {
        if let Err(error) = write_maps(cell.pid, outer) {
            return Err(start_error("writing the cell's uid and gid maps", error));
        }
    }
    write_go(&sync_write).map_err(|error| start_error("waking the cell", error))?;
    drop(sync_write);
    await_ready(&mut cell, &report_read)?;
    // Once ready, the worker is the init's only child.
    cell.worker = children(cell.pid).first().and_then(|&worker| child_pidfd(worker, cell.pid));
    Ok(cell)
}

impl CellIo {
    /// The descriptors the cell's init holds: these, and its ends of the report and sync pipes.
    fn fds(&self, report: &OwnedFd, sync: &OwnedFd) -> Fds {
        Fds {
            stdin: self.stdin.as_raw_fd(),
            stdout: self.stdout.as_raw_fd(),
            stderr: self.stderr.as_raw_fd(),
            channel: self.channel.as_raw_fd(),
            report: report.as_raw_fd(),
            sync: sync.as_raw_fd(),
        }
    }
}

/// Clones the cell's init, which runs `child::init` with `spawn`: its pid and a pidfd of it.
fn clone_init(plan: &Arc<Plan>, spawn: &Spawn) -> io::Result<(libc::pid_t, OwnedFd)> {
    let flags = plan.namespaces.as_ref().map_or(0, |namespaces| namespaces.clone_flags());
    let mut pidfd: libc::c_int = -1;
    let args = CloneArgs {
        flags: flags | libc::CLONE_PIDFD as u64,
        pidfd: &mut pidfd as *mut libc::c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 with fork semantics (no CLONE_VM): the child gets a copy of this thread and
    // runs only `child::init`, which never returns and makes system calls only.
    let pid = unsafe {
        libc::syscall(libc::SYS_clone3, &args as *const CloneArgs, size_of::<CloneArgs>())
    };
    if pid == 0 {
        // SAFETY: this is the child of the clone above.
        unsafe { child::init(plan, spawn) };
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CLONE_PIDFD wrote a descriptor we now own.
    Ok((pid as libc::pid_t, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// The program's whole environment: `HOME=` its work directory.
fn home_variable(work_dir: &CString) -> Result<CString, SandboxError> {
    let mut home = b"HOME=".to_vec();
    home.extend_from_slice(work_dir.as_bytes());
    CString::new(home).map_err(|_| SandboxError::Start {
        step: "naming the work directory",
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })
}

/// The descriptors among `trees` (-1 for none), sorted: the ones the child keeps open.
fn held(trees: &[libc::c_int]) -> Vec<libc::c_int> {
    let mut held: Vec<libc::c_int> = trees.iter().copied().filter(|fd| *fd >= 0).collect();
    held.sort_unstable();
    held
}

/// A pidfd of `pid` if it is a child of `parent`, else `None`. A pid read from `/proc` may be
/// reused by any process of the host once the one it named is reaped, and a pidfd of that one
/// would let the host signal a stranger: the pidfd is opened first, then the process's parent
/// read, then the pidfd's process found alive. The pidfd pins one process and its pid is not
/// reused while that process lives, so the parent read is that process's.
fn child_pidfd(pid: libc::pid_t, parent: libc::pid_t) -> Option<OwnedFd> {
    let pidfd = pidfd_open(pid)?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold anything) start at its last `)`: the
    // state, then the parent's pid.
    let read_parent: libc::pid_t =
        stat.rsplit_once(')')?.1.split_ascii_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: pidfd_send_signal on a pidfd we own, signal 0 (a check only), no siginfo.
    let alive = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    } == 0;
    (alive && read_parent == parent).then_some(pidfd)
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: on success, a fresh descriptor owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// The work directory: in the cell's `/tmp` with namespaces (the worker makes it), or a fresh
/// private directory of the host's without. Its name is unpredictable either way.
pub(crate) fn work_dir(
    plan: &Plan,
    owner: Option<u32>,
) -> Result<(CString, Option<PathBuf>), SandboxError> {
    let mut random = [0u8; 8];
    // SAFETY: getrandom fills the buffer we own.
    let filled = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    if filled != random.len() as isize {
        // A predictable name is what the name is for not to be.
        return Err(SandboxError::Start {
            step: "naming the work directory",
            source: io::Error::last_os_error(),
        });
    }
    let name =
        format!("work-{}", random.iter().map(|byte| format!("{byte:02x}")).collect::<String>());
    if plan.namespaces.is_some() {
        return Ok((crate::mounts::cstring(format!("/tmp/{name}"))?, None));
    }
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("code-runtime-{name}"));
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|error| SandboxError::Start {
        step: "making the work directory",
        source: error,
    })?;
    if let Some(owner) = owner {
        std::os::unix::fs::chown(&dir, Some(owner), Some(owner)).map_err(|error| {
            SandboxError::Start { step: "making the work directory", source: error }
        })?;
    }
    Ok((crate::mounts::cstring(&dir)?, Some(dir)))
}

fn remove(dir: Option<PathBuf>) {
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A root host maps the cell's user to a uid of the cell's own.
fn write_maps(pid: libc::pid_t, outer: u32) -> io::Result<()> {
    std::fs::write(format!("/proc/{pid}/uid_map"), format!("{CELL_ID} {outer} 1"))?;
    std::fs::write(format!("/proc/{pid}/gid_map"), format!("{CELL_ID} {outer} 1"))
}

fn write_go(sync: &OwnedFd) -> io::Result<()> {
    // SAFETY: writing one byte we own to a pipe we own.
    if unsafe { libc::write(sync.as_raw_fd(), [1u8].as_ptr().cast(), 1) } == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Waits for the init's report: ready, or the stage that failed.
fn await_ready(cell: &mut Cell, report: &OwnedFd) -> Result<(), SandboxError> {
    let mut message = [0u8; 8];
    let mut filled = 0;
    while filled < message.len() {
        // SAFETY: reading into the buffer we own.
        let read = unsafe {
            libc::read(
                report.as_raw_fd(),
                message[filled..].as_mut_ptr().cast(),
                message.len() - filled,
            )
        };
        if read > 0 {
            filled += read as usize;
        } else if read == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    if filled < message.len() {
        let exit = wait(&cell.pidfd, 0).ok().flatten();
        cell.exit = exit;
        cell.cleanup();
        return Err(SandboxError::Start {
            step: "starting the cell's init",
            source: io::Error::other(format!("the init ended first ({exit:?})")),
        });
    }
    let stage = u32::from_ne_bytes([message[0], message[1], message[2], message[3]]);
    let errno = i32::from_ne_bytes([message[4], message[5], message[6], message[7]]);
    if stage == Stage::Ready as u32 {
        return Ok(());
    }
    cell.exit = wait(&cell.pidfd, 0).ok().flatten();
    cell.cleanup();
    let step = if stage >= MOUNT_STEPS {
        mount_step_name(&cell.plan, (stage - MOUNT_STEPS) as usize)
    } else {
        Stage::describe(stage)
    };
    Err(SandboxError::Start { step, source: io::Error::from_raw_os_error(errno) })
}

/// A mount step's name, for messages.
fn mount_step_name(plan: &Plan, index: usize) -> &'static str {
    use crate::mounts::Step;
    match plan.steps.get(index) {
        Some(Step::Private) => "making mounts private",
        Some(Step::Tmpfs { .. }) => "mounting a tmpfs",
        Some(Step::CellTmp { .. }) => "mounting /tmp",
        Some(Step::Dir { .. }) => "making a directory of the root",
        Some(Step::File { .. }) => "making a file of the root",
        Some(Step::Bind { .. }) => "binding a host path",
        Some(Step::Symlink { .. }) => "making a symbolic link",
        Some(Step::PivotRoot { .. }) => "pivoting the root",
        Some(Step::Proc { .. }) => "mounting /proc",
        Some(Step::ReadOnlyRoot) => "making the root read-only",
        None => "a mount step",
    }
}

//! The one place a Python process is started, and the OS containment it starts under.
//!
//! Every spawn goes through [`python_command`] (clippy's `disallowed-methods` bans
//! `Command::new` elsewhere): `-I -S -B -X utf8`, an empty environment, stdin from `/dev/null`.
//! Spawns happen on the spawner thread (`spawner.rs`), so the parent-death signal, which follows
//! the spawning *thread*, fires only when the host process dies. A run's child is then contained
//! before `exec` by [`contain`], in the forked child:
//!
//! ```text
//! host ──fork──▶ supervisor (new session, rlimits, parent-death signal, PID namespace or subreaper)
//!                   └──fork──▶ worker: exec python3 (fd 3 = frame channel, fds ≥ 4 closed)
//! ```
//!
//! The supervisor is a copy of the host that never execs: it closes every descriptor, waits for
//! the worker, makes sure nothing the worker started survives, and exits with the worker's status
//! (`128 + signal` when it was killed). With a PID namespace (`unshare(CLONE_NEWPID)`, which needs
//! CAP_SYS_ADMIN) the worker is the namespace's init and the kernel kills every process in it when
//! the worker dies, before the supervisor's `waitpid` returns. Without one the supervisor is a
//! child subreaper: orphans of the worker's descendants are re-parented to it, and it kills its
//! children until none is left.

use std::io;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use code_runtime::Limits;

use crate::PROTOCOL_FD;

/// The child bootstrap, compiled by the probe and loaded by [`loader`].
pub(crate) const BOOTSTRAP: &str = include_str!("../python/bootstrap.py");

/// Resource limits applied before `exec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Rlimits {
    /// `RLIMIT_AS`, bytes.
    pub(crate) address_space: u64,
    /// `RLIMIT_CPU` soft limit, seconds; the hard limit is one more.
    pub(crate) cpu_seconds: u64,
    /// Try `unshare(CLONE_NEWPID)` before falling back to the subreaper.
    pub(crate) pid_namespace: bool,
}

impl Rlimits {
    /// The limits of a run under `limits`. `RLIMIT_CPU` is only the kernel's backstop behind the
    /// host's millisecond polling of the compute budget, so it is rounded up and given a second.
    pub(crate) fn of(limits: &Limits, pid_namespace: bool) -> Self {
        Self {
            address_space: limits.memory_bytes(),
            cpu_seconds: limits.compute_ms.div_ceil(1000) + 1,
            pid_namespace,
        }
    }
}

/// The base of every Python command: `-I -S -B -X utf8`, stdin from `/dev/null`, and an empty
/// environment unless the caller resolves a version-manager shim (which needs the host's).
pub(crate) fn python_command(interpreter: &Path, environment: Environment) -> Command {
    #[expect(clippy::disallowed_methods, reason = "this is the one spawn path")]
    let mut command = Command::new(interpreter);
    // -I: no PYTHON* variables, no user site, no script directory on sys.path. -S: no `site`
    // (it costs several times the bare start). -B: no bytecode files. -X utf8: UTF-8 everywhere,
    // whatever the (empty) locale says.
    command.args(["-I", "-S", "-B", "-X", "utf8"]).stdin(Stdio::null());
    if environment == Environment::Cleared {
        command.env_clear();
    }
    command
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Environment {
    Cleared,
    /// Only to resolve the interpreter: a shim such as pyenv's picks the real one from the
    /// environment. Nothing of the program's runs this way.
    Inherited,
}

/// The program run with `-c`: reads the bootstrap's bytecode from the frame channel (a 10-digit
/// length, then the marshalled code object: the prelude of docs/python-frame-protocol.md), runs
/// it, and hands it the channel's number as `_FD` and the bytes that followed the prelude (the
/// start of the first frame) as `_PRELUDE`.
pub(crate) fn loader() -> String {
    format!(
        "import marshal, posix\n\
         b = b''\n\
         while len(b) < 10 or len(b) < 10 + int(b[:10]):\n    \
         chunk = posix.read({PROTOCOL_FD}, 1 << 20)\n    \
         if not chunk: posix._exit(70)\n    \
         b += chunk\n\
         n = 10 + int(b[:10])\n\
         exec(marshal.loads(b[10:n]), {{'__name__': '__main__', '_FD': {PROTOCOL_FD}, '_PRELUDE': b[n:]}})"
    )
}

/// Starts one run's child: the supervisor, whose child (the worker) executes the bootstrap with
/// `channel` as its frame channel, in `workdir`, stdout and stderr piped. Call it on the spawner
/// thread.
pub(crate) fn spawn_run(
    executable: &Path,
    workdir: &Path,
    channel: RawFd,
    rlimits: Rlimits,
) -> io::Result<Child> {
    let mut command = python_command(executable, Environment::Cleared);
    command.arg("-c").arg(loader());
    command.current_dir(workdir).stdout(Stdio::piped()).stderr(Stdio::piped());
    let plan = ExecPlan { channel: Some(channel), host_pid: host_pid(), rlimits };
    // SAFETY: `contain` only makes async-signal-safe calls (see its documentation).
    unsafe { command.pre_exec(move || contain(&plan)) };
    command.spawn()
}

/// Starts `executable` contained as a run is, with `script` as its program and stdout and stderr
/// piped, and waits for it: what the probe checks.
pub(crate) fn run_contained(
    executable: &Path,
    script: &str,
    rlimits: Rlimits,
) -> io::Result<std::process::Output> {
    let mut command = python_command(executable, Environment::Cleared);
    command.arg("-c").arg(script).stdout(Stdio::piped()).stderr(Stdio::piped());
    let plan = ExecPlan { channel: None, host_pid: host_pid(), rlimits };
    // SAFETY: `contain` only makes async-signal-safe calls (see its documentation).
    unsafe { command.pre_exec(move || contain(&plan)) };
    command.output()
}

/// The worker's pid (as the host sees it): the supervisor's only child right after the spawn.
pub(crate) fn worker_pid(supervisor: u32) -> Option<libc::pid_t> {
    let children =
        std::fs::read_to_string(format!("/proc/{supervisor}/task/{supervisor}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

fn host_pid() -> libc::pid_t {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// What the forked child needs, captured before the fork so nothing is allocated after it.
#[derive(Clone, Copy)]
struct ExecPlan {
    channel: Option<RawFd>,
    host_pid: libc::pid_t,
    rlimits: Rlimits,
}

/// `close_range`'s flag that marks descriptors close-on-exec instead of closing them (Linux 5.11).
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Runs in the forked child, before `exec`. The host may be multi-threaded, so between `fork` and
/// `exec` only async-signal-safe calls are allowed: raw system calls, no allocation, no locks.
fn contain(plan: &ExecPlan) -> io::Result<()> {
    // SAFETY: every call below is a plain system call on values owned by this process.
    unsafe {
        // Own session and process group: no terminal signals, and a group to kill.
        check(libc::setsid())?;
        if let Some(channel) = plan.channel {
            if channel == PROTOCOL_FD {
                check(libc::fcntl(PROTOCOL_FD, libc::F_SETFD, 0))?;
            } else {
                check(libc::dup2(channel, PROTOCOL_FD))?;
            }
        }
        set_rlimit(libc::RLIMIT_CORE, 0, 0)?;
        set_rlimit(libc::RLIMIT_AS, plan.rlimits.address_space, plan.rlimits.address_space)?;
        set_rlimit(libc::RLIMIT_CPU, plan.rlimits.cpu_seconds, plan.rlimits.cpu_seconds + 1)?;
        // Die with the host. The check closes the race where the host died before the prctl.
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
        if libc::getppid() != plan.host_pid {
            libc::_exit(111);
        }
        let namespaced = plan.rlimits.pid_namespace && libc::unshare(libc::CLONE_NEWPID) == 0;
        if !namespaced {
            check(libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))?;
        }
        let supervisor = libc::getpid();
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                // The worker. Outside a namespace it leads its own process group, so the
                // supervisor can kill the group without killing itself.
                check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
                if !namespaced {
                    if libc::getppid() != supervisor {
                        libc::_exit(111);
                    }
                    check(libc::setpgid(0, 0))?;
                }
                // fds 0-2 and the channel survive exec; std's error-report pipe stays usable until
                // exec.
                close_from(PROTOCOL_FD as libc::c_uint + 1, CLOSE_RANGE_CLOEXEC);
                Ok(())
            }
            worker => supervise(worker, namespaced),
        }
    }
}

/// The supervisor's whole life. Never returns.
///
/// # Safety
///
/// Only in the forked child of [`contain`]; async-signal-safe calls only.
unsafe fn supervise(worker: libc::pid_t, namespaced: bool) -> ! {
    // SAFETY: plain system calls in a single-threaded process that will only `_exit`.
    unsafe {
        // Every descriptor goes, including std's exec-error pipe: the host sees the spawn succeed
        // when the worker execs, and sees EOF on the pipes and fd 3 when the worker is gone.
        close_from(0, 0);
        let mut status = 0;
        let worker_status = loop {
            let reaped = libc::waitpid(if namespaced { worker } else { -1 }, &mut status, 0);
            if reaped == worker {
                break status;
            }
            // Outside a namespace, re-parented orphans are reaped here too; keep waiting.
            if reaped == -1 && errno() != libc::EINTR {
                break 0;
            }
        };
        if !namespaced {
            sweep(worker);
        }
        let code = if libc::WIFEXITED(worker_status) {
            libc::WEXITSTATUS(worker_status)
        } else if libc::WIFSIGNALED(worker_status) {
            128 + libc::WTERMSIG(worker_status)
        } else {
            1
        };
        libc::_exit(code)
    }
}

/// Kills and reaps every remaining descendant: the worker's process group, then, until none is
/// left, every child of this subreaper (orphans keep arriving while their parents die).
///
/// # Safety
///
/// As [`supervise`].
unsafe fn sweep(worker: libc::pid_t) {
    // SAFETY: plain system calls on this process's own children.
    unsafe {
        libc::kill(-worker, libc::SIGKILL);
        let mut buffer = [0u8; 4096];
        loop {
            let fd = libc::open(
                c"/proc/thread-self/children".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if fd >= 0 {
                let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
                libc::close(fd);
                let mut pid: libc::pid_t = 0;
                for &byte in &buffer[..usize::try_from(read).unwrap_or(0)] {
                    if byte.is_ascii_digit() {
                        pid = pid * 10 + libc::pid_t::from(byte - b'0');
                    } else if pid > 0 {
                        libc::kill(pid, libc::SIGKILL);
                        pid = 0;
                    }
                }
            }
            let mut status = 0;
            if libc::waitpid(-1, &mut status, 0) == -1 && errno() != libc::EINTR {
                return; // ECHILD: nothing left.
            }
        }
    }
}

/// Closes (or, with `CLOSE_RANGE_CLOEXEC`, marks close-on-exec) every descriptor from `first` up.
///
/// # Safety
///
/// Descriptors in the range must not be in use by this process afterwards.
unsafe fn close_from(first: libc::c_uint, flags: libc::c_uint) {
    // SAFETY: close_range and close/fcntl on descriptors the caller gave up.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, flags) == 0 {
            return;
        }
        // Kernels before 5.9 (5.11 for the flag): walk the descriptor table up to its limit.
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(65_536) as libc::c_int
        } else {
            1024
        };
        for fd in first as libc::c_int..top {
            if flags == 0 {
                libc::close(fd);
            } else {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

unsafe fn set_rlimit(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> io::Result<()> {
    let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: setrlimit reads the struct we own.
    check(unsafe { libc::setrlimit(resource, &limit) })
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result == -1 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn errno() -> libc::c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

//! What runs in a cell's processes before the program: the *init* (the cell's PID 1, or its
//! subreaper without namespaces) and the *worker* (the process that becomes the program).
//!
//! Both are copies of a multi-threaded host made with a raw `clone`: between the clone and the
//! `exec` (the worker) or for its whole life (the init), only system calls on data prepared before
//! the clone are allowed. No allocation (another thread may have held the allocator's lock at the
//! clone), no locks, no panics, no formatting. Every failure is reported as a [`Stage`] and an
//! errno on a pipe, and the process exits.
//!
//! One exception: a spawner process that serves its cells in copies of itself
//! (`spawner_server::serve_calling`) is single-threaded, so its copies hold no lock another
//! thread took; its worker is made with the C library's `fork` (which leaves the library's view
//! of the process right: its thread id, its locks) and, once every layer is on, calls the
//! program's entry instead of `exec`.

use crate::child_mounts::mount_step;
use crate::plan::{Fds, Plan, Spawn, WorkerEnd};
use crate::seccomp;

/// Declares [`Stage`] from one list: each stage's variant (its code is its position) and what
/// it does, for messages.
macro_rules! stages {
    ($($stage:ident => $doing:literal,)*) => {
        /// Where a cell's start stopped. Mount steps report `MOUNT_STEPS + index`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u32)]
        pub(crate) enum Stage {
            $($stage,)*
        }

        impl Stage {
            /// Every stage, in code order.
            pub(crate) const ALL: &[Stage] = &[$(Stage::$stage,)*];

            /// What the stage does, for messages.
            pub(crate) fn doing(self) -> &'static str {
                match self {
                    $(Stage::$stage => $doing,)*
                }
            }
        }
    };
}

stages! {
    Ready => "ready",
    Signals => "resetting signals",
    DeathSignal => "setting the parent-death signal",
    Descriptors => "closing the host's descriptors",
    Setgroups => "denying setgroups",
    UidMap => "writing the uid map",
    GidMap => "writing the gid map",
    Sync => "waiting for the host",
    Hostname => "setting the host name",
    Dumpable => "making the init undumpable",
    Subreaper => "becoming a subreaper",
    ExecPipe => "creating the exec pipe",
    Fork => "starting the worker",
    Session => "starting a session",
    Identity => "switching to the cell's user",
    NoNewPrivs => "setting no_new_privs",
    Rlimit => "setting resource limits",
    WorkDir => "making the work directory",
    StandardDescriptors => "placing the standard descriptors",
    Landlock => "enforcing landlock",
    Seccomp => "installing the seccomp filter",
    Exec => "executing the program",
}

/// Mount step `n` is reported as stage `MOUNT_STEPS + n`.
pub(crate) const MOUNT_STEPS: u32 = 1000;

impl Stage {
    /// The stage a child reported as `code`; `None` for a mount step's code.
    pub(crate) fn from_code(code: u32) -> Option<Self> {
        Self::ALL.get(code as usize).copied()
    }

    /// What the stage of `code` does; "a mount step" for a mount step's code.
    pub(crate) fn describe(code: u32) -> &'static str {
        Self::from_code(code).map_or("a mount step", Stage::doing)
    }
}

/// A failure: the stage and the errno.
type Failure = (u32, libc::c_int);

fn errno() -> libc::c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// `Ok` unless a system call returned -1.
fn check(stage: Stage, result: libc::c_long) -> Result<(), Failure> {
    if result == -1 { Err((stage as u32, errno())) } else { Ok(()) }
}

/// Writes a failure (or `Ready`) to a report pipe: one write of eight bytes, atomic on a pipe.
///
/// # Safety
///
/// `fd` is a pipe's write end.
unsafe fn report(fd: libc::c_int, (stage, errno): Failure) {
    let mut message = [0u8; 8];
    message[..4].copy_from_slice(&stage.to_ne_bytes());
    message[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: writing eight bytes we own.
    unsafe { libc::write(fd, message.as_ptr().cast(), message.len()) };
}

/// The cell's init. Never returns.
///
/// # Safety
///
/// Only in the child of the cell's `clone`, before anything else.
pub(crate) unsafe fn init(plan: &Plan, spawn: &Spawn) -> ! {
    // SAFETY: each helper below makes system calls only, on data prepared before the clone.
    unsafe {
        disguise(spawn);
        let fds = match prepare(spawn) {
            Ok(fds) => fds,
            Err(failure) => {
                report(spawn.fds.report, failure);
                libc::_exit(125)
            }
        };
        if let Err(failure) = enter(plan, spawn, &fds) {
            report(fds.report, failure);
            libc::_exit(125);
        }
        let worker = match start_worker(plan, spawn, &fds) {
            Ok(worker) => worker,
            Err(failure) => {
                report(fds.report, failure);
                libc::_exit(125)
            }
        };
        report(fds.report, (Stage::Ready as u32, 0));
        for fd in [fds.report, fds.sync, fds.stdin, fds.stdout, fds.stderr, fds.channel] {
            libc::close(fd);
        }
        drop_capabilities();
        if spawn.init_image >= 0 && worker == 2 {
            execute_image(spawn.init_image);
        }
        supervise(worker, plan.namespaces.is_none())
    }
}

/// Makes the init show nothing of the host it is a copy of: its name (`/proc/1/comm`, the
/// cloning thread's) becomes `cell`, and the host's command line and environment, which
/// `/proc/1/cmdline` and `environ` read from the init's memory, are overwritten in its copy of
/// that memory. The command line reads as `cell`: its last byte is left non-zero, which makes
/// the kernel read it as a title ending at the first NUL (as after `setproctitle`), so not even
/// its length shows.
///
/// # Safety
///
/// Only in the init, right after the clone: the ranges are the host's, in the init's own copy
/// of the host's memory, where nothing reads them any more.
unsafe fn disguise(spawn: &Spawn) {
    const TITLE: &[u8] = b"cell\0";
    // SAFETY: PR_SET_NAME reads a NUL-terminated string we own.
    unsafe { libc::prctl(libc::PR_SET_NAME, TITLE.as_ptr(), 0, 0, 0) };
    let Some(strings) = spawn.host_strings else { return };
    let (env_start, env_end) = strings.env;
    // SAFETY: the host's environment strings, mapped and writable in this copy of its memory.
    unsafe { std::ptr::write_bytes(env_start as *mut u8, 0, env_end - env_start) };
    let (start, end) = strings.args;
    let len = end - start;
    // SAFETY: the host's argument strings, likewise.
    unsafe {
        std::ptr::write_bytes(start as *mut u8, 0, len);
        if len > TITLE.len() {
            std::ptr::copy_nonoverlapping(TITLE.as_ptr(), start as *mut u8, TITLE.len());
            *((end - 1) as *mut u8) = b' ';
        }
    }
}

/// Resets what the host left behind (signal handlers, the signal mask, descriptors) and arms the
/// parent-death signal. Returns the descriptors the cell keeps, moved to new numbers.
unsafe fn prepare(spawn: &Spawn) -> Result<Fds, Failure> {
    // SAFETY: plain system calls on values we own.
    unsafe {
        // The host's handlers would run here, writing to descriptors that no longer mean what
        // they meant (a runtime's signal pipe, say).
        for signal in 1..=64 {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        check(
            Stage::Signals,
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()).into(),
        )?;
        check(
            Stage::DeathSignal,
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0).into(),
        )?;
        keep_only(&spawn.fds, &spawn.kept)
    }
}

/// The lowest number of a descriptor the init holds: placing the program's at 0 to 3 must not
/// overwrite one.
const FIRST_HELD: libc::c_int = 10;

/// Moves the cell's descriptors to fresh numbers of at least [`FIRST_HELD`] and closes every other
/// descriptor the host had open but the detached trees (`trees`, sorted), which the mount steps
/// attach.
unsafe fn keep_only(fds: &Fds, trees: &[libc::c_int]) -> Result<Fds, Failure> {
    let old = [fds.stdin, fds.stdout, fds.stderr, fds.channel, fds.report, fds.sync];
    let mut new = [0; 6];
    for (slot, fd) in new.iter_mut().zip(old) {
        // SAFETY: duplicating a descriptor we hold.
        *slot = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, FIRST_HELD) };
        check(Stage::Descriptors, (*slot).into())?;
    }
    let mut sorted = new;
    sorted.sort_unstable();
    // Closes the gaps between the kept descriptors: both lists are sorted, so a merge visits the
    // kept ones in order without allocating.
    let (mut a, mut b) = (0, 0);
    let mut first: libc::c_uint = 0;
    loop {
        let next = match (sorted.get(a), trees.get(b)) {
            (Some(&x), Some(&y)) if x <= y => {
                a += 1;
                x
            }
            (_, Some(&y)) => {
                b += 1;
                y
            }
            (Some(&x), None) => {
                a += 1;
                x
            }
            (None, None) => break,
        };
        let fd = next as libc::c_uint;
        if fd > first {
            // SAFETY: closing descriptors the cell does not keep.
            unsafe { close_range(first, fd - 1, 0) };
        }
        first = first.max(fd + 1);
    }
    // SAFETY: as above.
    unsafe { close_range(first, libc::c_uint::MAX, 0) };
    let [stdin, stdout, stderr, channel, report, sync] = new;
    Ok(Fds { stdin, stdout, stderr, channel, report, sync })
}

/// `close_range`, or a loop over the range where the kernel lacks it.
unsafe fn close_range(first: libc::c_uint, last: libc::c_uint, flags: libc::c_uint) {
    // SAFETY: closing (or marking) descriptors the caller gave up.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, flags) == 0 {
            return;
        }
        let top = last.min(65_535);
        for fd in first..=top {
            if flags == 0 {
                libc::close(fd as libc::c_int);
            } else {
                libc::fcntl(fd as libc::c_int, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

/// The namespaces: the user mapping, the go-ahead of the host, the host name and the file system.
unsafe fn enter(plan: &Plan, spawn: &Spawn, fds: &Fds) -> Result<(), Failure> {
    // SAFETY: plain system calls on data prepared before the clone.
    unsafe {
        if let Some(maps) = &spawn.self_maps {
            write_file(Stage::Setgroups, c"/proc/self/setgroups", b"deny")?;
            write_file(Stage::UidMap, c"/proc/self/uid_map", &maps.uid)?;
            write_file(Stage::GidMap, c"/proc/self/gid_map", &maps.gid)?;
        }
        // The host writes the maps itself when it may, then says go; EOF means it is gone.
        let mut go = [0u8; 1];
        if libc::read(fds.sync, go.as_mut_ptr().cast(), 1) != 1 {
            return Err((Stage::Sync as u32, libc::EPIPE));
        }
        become_cell_user(spawn)?;
        // The init's memory is the cell's control; no process of the cell may read or write it.
        check(Stage::Dumpable, libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0).into())?;
        let Some(namespaces) = &plan.namespaces else {
            return check(
                Stage::Subreaper,
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0).into(),
            );
        };
        let name = namespaces.hostname.as_bytes();
        check(Stage::Hostname, libc::sethostname(name.as_ptr().cast(), name.len()).into())?;
        for (index, step) in plan.steps.iter().enumerate() {
            let tree = spawn.trees.get(index).copied().unwrap_or(-1);
            if let Err(errno) = mount_step(step, tree, &spawn.tmp_options) {
                return Err((MOUNT_STEPS + index as u32, errno));
            }
        }
        for &tree in &spawn.held_trees {
            libc::close(tree);
        }
        Ok(())
    }
}

/// With a user namespace, the init takes the cell's user as soon as the host has mapped it: what
/// it creates (the root's directories, mount points) must be owned by a user the cell's file
/// systems can represent. It keeps its capabilities in the namespace, which it needs to mount:
/// the namespace's root user is not mapped, so the switch is not a drop from root.
unsafe fn become_cell_user(spawn: &Spawn) -> Result<(), Failure> {
    let Some((uid, gid)) = spawn.init_identity else { return Ok(()) };
    // SAFETY: plain system calls.
    unsafe { set_identity(uid, gid) }
}

/// Switches the calling thread to `uid` and `gid` with raw system calls: the C library's wrappers
/// signal every thread the host had (to switch them too), and wait forever for threads that do
/// not exist in a clone.
///
/// The kernel clears the parent-death signal when a process's credentials change, so it is armed
/// again here: without it, a cell would outlive the thread (and the host) that started it.
unsafe fn set_identity(uid: libc::uid_t, gid: libc::gid_t) -> Result<(), Failure> {
    // SAFETY: plain system calls.
    unsafe {
        check(Stage::Identity, libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
        check(Stage::Identity, libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
        check(
            Stage::DeathSignal,
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0).into(),
        )
    }
}

/// Writes `contents` to the file `path` (a `/proc` control file).
unsafe fn write_file(stage: Stage, path: &std::ffi::CStr, contents: &[u8]) -> Result<(), Failure> {
    // SAFETY: open, write and close on a path and bytes we own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(stage, fd.into())?;
        let written = libc::write(fd, contents.as_ptr().cast(), contents.len());
        let failure = (written != contents.len() as isize).then(errno);
        libc::close(fd);
        failure.map_or(Ok(()), |errno| Err((stage as u32, errno)))
    }
}

/// Starts the worker; returns its pid once it has executed the program (or, in a dry run,
/// passed every step).
unsafe fn start_worker(plan: &Plan, spawn: &Spawn, fds: &Fds) -> Result<libc::pid_t, Failure> {
    // SAFETY: plain system calls; the worker branch never returns.
    unsafe {
        let mut pipe = [0; 2];
        check(Stage::ExecPipe, libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC).into())?;
        // The pipe took the lowest free numbers (0 and 1, once the host's are closed), which the
        // worker overwrites with the program's standard descriptors.
        for end in &mut pipe {
            let moved = libc::fcntl(*end, libc::F_DUPFD_CLOEXEC, FIRST_HELD);
            check(Stage::ExecPipe, moved.into())?;
            libc::close(*end);
            *end = moved;
        }
        let [exec_read, exec_write] = pipe;
        let worker = match spawn.end {
            // The program runs in this copy, threads and all: the C library's `fork` leaves the
            // library's view of the process right (a raw clone would leave the spawner's thread
            // id in it). Its fork handlers take locks no other thread holds: the spawner
            // process has one thread.
            WorkerEnd::Call(_) => libc::fork().into(),
            // A raw clone: the C library's `fork` would run the host's fork handlers, which take
            // locks another thread of the host may have held when the init was cloned.
            WorkerEnd::Execute | WorkerEnd::Exit => libc::syscall(
                libc::SYS_clone,
                libc::SIGCHLD as libc::c_ulong,
                0usize,
                0usize,
                0usize,
                0usize,
            ),
        };
        check(Stage::Fork, worker)?;
        if worker == 0 {
            libc::close(exec_read);
            let failure =
                become_program(plan, spawn, fds).err().unwrap_or((Stage::Exec as u32, errno()));
            report(exec_write, failure);
            libc::_exit(127);
        }
        libc::close(exec_write);
        // The worker's end closes on exec (or before its entry is called): end of file means
        // the program started.
        let mut message = [0u8; 8];
        let read = libc::read(exec_read, message.as_mut_ptr().cast(), message.len());
        libc::close(exec_read);
        if read == 8 {
            let stage = u32::from_ne_bytes([message[0], message[1], message[2], message[3]]);
            let errno = i32::from_ne_bytes([message[4], message[5], message[6], message[7]]);
            return Err((stage, errno));
        }
        Ok(worker as libc::pid_t)
    }
}

/// The worker: the cell's user, no privileges, limits, the work directory, the standard
/// descriptors, Landlock, seccomp, then the program. Returns only on failure.
unsafe fn become_program(plan: &Plan, spawn: &Spawn, fds: &Fds) -> Result<(), Failure> {
    // SAFETY: plain system calls on data prepared before the clone.
    unsafe {
        check(Stage::Session, libc::setsid().into())?;
        check(
            Stage::DeathSignal,
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0).into(),
        )?;
        if let Some((uid, gid)) = spawn.identity {
            // Supplementary groups go where the kernel allows it (not where setgroups is denied).
            libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>());
            set_identity(uid, gid)?;
        }
        drop_capabilities();
        check(Stage::NoNewPrivs, libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into())?;
        for (resource, soft, hard) in &spawn.rlimits {
            let limit = libc::rlimit { rlim_cur: *soft, rlim_max: *hard };
            check(Stage::Rlimit, libc::setrlimit(*resource, &limit).into())?;
        }
        if spawn.make_work_dir && libc::mkdir(spawn.work_dir.as_ptr(), 0o700) == -1 {
            return Err((Stage::WorkDir as u32, errno()));
        }
        check(Stage::WorkDir, libc::chdir(spawn.work_dir.as_ptr()).into())?;
        for (from, to) in [(fds.stdin, 0), (fds.stdout, 1), (fds.stderr, 2), (fds.channel, 3)] {
            check(Stage::StandardDescriptors, libc::dup2(from, to).into())?;
        }
        // Everything else closes when the program starts (the exec pipe included, which is how
        // the init learns that it did).
        close_range(4, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC);
        if let Some(ruleset) = &plan.landlock {
            let extra = (!spawn.make_work_dir).then_some(&spawn.work_dir);
            ruleset.enforce(extra).map_err(|errno| (Stage::Landlock as u32, errno))?;
        }
        for program in &plan.seccomp {
            seccomp::install(program).map_err(|errno| (Stage::Seccomp as u32, errno))?;
        }
        match spawn.end {
            WorkerEnd::Exit => libc::_exit(0),
            WorkerEnd::Call(entry) => call(plan, spawn, entry),
            WorkerEnd::Execute => {
                libc::execve(plan.executable.as_ptr(), spawn.argv.as_ptr(), spawn.envp.as_ptr());
                Err((Stage::Exec as u32, errno()))
            }
        }
    }
}

/// The worker of a spawner process that serves its cells in copies of itself: starts the
/// program as `exec` would have, then runs it. Never returns.
///
/// What the copy keeps of the spawner instead of a fresh image: its memory (the spawner's
/// environment is empty and its heap holds only the cells' plan, no secret), the address-space
/// layout of its executable and libraries (every cell of the spawner shares it; V8 reserves its
/// own regions, its heap and code among them, after the fork, at addresses of its own), and the
/// pages the dynamic loader wrote (relocations: shared with the spawner until written, which is
/// the point: they are a megabyte and a half of a V8 executable's).
///
/// # Safety
///
/// Only in the worker, every layer on, in a copy of a single-threaded process.
unsafe fn call(plan: &Plan, spawn: &Spawn, entry: fn() -> libc::c_int) -> ! {
    // SAFETY: plain system calls and writes to this copy's own memory; then the program, which
    // owns this process. This frame never returns: `reseed`'s promise.
    unsafe {
        // A copy that cannot draw its own secrets does not run its program with the spawner's.
        if !crate::reseed::reseed() && crate::reseed::SUPPORTED {
            libc::_exit(PANICKED);
        }
        retitle(plan, spawn);
        // Dumpable, as `exec` would have made it (the init's flag came with the fork): its
        // memory is the spawner's user namespace's, not the cell's, so an unprivileged host
        // could otherwise read nothing of it (`smaps`, `/proc/<pid>/root/tmp`), and a cell's
        // memory is counted from there.
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
        // What `exec` would have closed: the descriptors marked close-on-exec above, the exec
        // pipe among them (whose end of file tells the init the program started).
        close_range(4, libc::c_uint::MAX, 0);
        // As a Rust executable's start does (the host's frames fail with EPIPE, not a signal).
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        // A panic must not unwind into the spawner's code this copy still holds: it would go on
        // as a spawner, inside the cell.
        libc::_exit(std::panic::catch_unwind(entry).unwrap_or(PANICKED))
    }
}

/// The exit code of a program entry that panicked (a Rust program's, when a panic ends it).
const PANICKED: libc::c_int = 101;

/// Makes a copy that calls its program read as `exec` would have made it: its name the
/// executable's file name (as much of it as the kernel keeps), its command line the plan's
/// arguments, written where the spawner's lie (the init overwrote them with its title), when
/// they fit (they do: the spawner's are the same executable and a longer argument).
///
/// # Safety
///
/// Only in the worker, in a copy of a single-threaded process.
unsafe fn retitle(plan: &Plan, spawn: &Spawn) {
    let path = plan.executable.as_bytes();
    let file_name = path.rsplit(|&byte| byte == b'/').next().unwrap_or(path);
    // The kernel keeps 15 bytes of a name, and a NUL.
    let mut name = [0u8; 16];
    let kept = file_name.len().min(15);
    name[..kept].copy_from_slice(&file_name[..kept]);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string we own.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0) };
    let Some(strings) = spawn.host_strings else { return };
    let (start, end) = strings.args;
    let needed: usize = plan.argv.iter().map(|arg| arg.as_bytes_with_nul().len()).sum();
    if needed > end - start {
        return;
    }
    // SAFETY: the spawner's argument strings, mapped and writable in this copy of its memory,
    // and long enough (checked above). The last byte stays NUL: the kernel then reads the whole
    // range as the arguments (the zeros after them as empty ones).
    unsafe {
        std::ptr::write_bytes(start as *mut u8, 0, end - start);
        let mut at = start;
        for arg in &plan.argv {
            let bytes = arg.as_bytes_with_nul();
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len());
            at += bytes.len();
        }
    }
}

/// `close_range`'s flag that marks descriptors close-on-exec instead of closing them.
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Drops every capability: the bounding and ambient sets, then the effective, permitted and
/// inheritable ones. Best effort: what the process never had it cannot drop.
unsafe fn drop_capabilities() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    /// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words of each set.
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset on our own process.
    unsafe {
        for capability in 0..64 {
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        let header = Header { version: VERSION_3, pid: 0 };
        let data = [
            Data { effective: 0, permitted: 0, inheritable: 0 },
            Data { effective: 0, permitted: 0, inheritable: 0 },
        ];
        libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr());
    }
}

/// The init's life once the program runs as the host's init image (`run_init.rs`), which does
/// what [`supervise`] does in a pid namespace with none of this copy's memory: its worker is PID 2,
/// its capabilities are dropped and it holds no descriptor but the image's. Returns only if the
/// `exec` fails, for the init to supervise as it is.
unsafe fn execute_image(image: libc::c_int) {
    let argv = [c"cell".as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: execveat on a descriptor we hold, with NUL-terminated vectors on our stack.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            image,
            c"".as_ptr(),
            argv.as_ptr(),
            envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
}

/// The init's life once the program runs: reap every child; when the worker ends, end too, with
/// its status (`128 + signal` when it was killed). In a PID namespace the kernel then ends every
/// process of the cell; without one, the init is a subreaper and kills what is left first.
unsafe fn supervise(worker: libc::pid_t, sweep: bool) -> ! {
    // SAFETY: waitpid, kill and _exit on our own children.
    unsafe {
        let mut status = 0;
        let worker_status = loop {
            let reaped = libc::waitpid(-1, &mut status, 0);
            if reaped == worker {
                break status;
            }
            if reaped == -1 && errno() != libc::EINTR {
                break 0;
            }
        };
        if sweep {
            sweep_children(worker);
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

/// Kills and reaps every remaining descendant of a subreaper: the worker's process group, then,
/// until none is left, every child (orphans keep arriving while their parents die).
unsafe fn sweep_children(worker: libc::pid_t) {
    // SAFETY: kill, open, read and waitpid on our own children.
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

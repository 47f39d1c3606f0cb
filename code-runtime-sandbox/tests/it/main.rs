//! Cells tried as an attacker would, with the system's Python as the program: what it can see,
//! write, reach and leave behind. Every test runs as root and as an unprivileged user in CI.

use std::io::{BufRead, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use code_runtime_sandbox::{
    Cell, CellExit, CellIo, CellLimits, CellPlan, CellSpec, Options, WatchedCell,
};

/// The system's Python (readable by every user, unlike a version manager's under `/root`).
const PYTHON: &str = "/usr/bin/python3";

fn python() -> PathBuf {
    std::fs::canonicalize(PYTHON).expect("the system's python3")
}

fn plan(options: Options, script: &str) -> CellPlan {
    let executable = python();
    let spec = CellSpec {
        args: vec![executable.clone().into(), "-I".into(), "-S".into(), "-c".into(), script.into()],
        read_only: vec![executable.clone()],
        executable,
        options,
        machine_cache: None,
    };
    CellPlan::new(&spec).expect("this machine contains programs")
}

/// What a finished cell printed, and how it ended.
struct Outcome {
    stdout: String,
    stderr: String,
    exit: CellExit,
}

/// Runs `script` in a fresh cell and waits for it (at most 20 s).
fn run(script: &str) -> Outcome {
    run_with(Options::default(), CellLimits::new(256 << 20, 10), script)
}

fn run_with(options: Options, limits: CellLimits, script: &str) -> Outcome {
    let plan = plan(options, script);
    let (mut cell, stdout, stderr) = start(&plan, limits);
    let exit = wait(&mut cell, Duration::from_secs(20));
    Outcome { stdout: read_all(stdout), stderr: read_all(stderr), exit }
}

fn start(plan: &CellPlan, limits: CellLimits) -> (Cell, std::fs::File, std::fs::File) {
    let (stdout_read, stdout_write) = pipe();
    let (stderr_read, stderr_write) = pipe();
    let (_host, channel) = std::os::unix::net::UnixStream::pair().unwrap();
    let stdin = std::fs::File::open("/dev/null").unwrap();
    let io = CellIo {
        stdin: stdin.into(),
        stdout: stdout_write,
        stderr: stderr_write,
        channel: channel.into(),
    };
    let cell = futures::executor::block_on(plan.start(io, limits)).expect("the cell starts");
    (cell, std::fs::File::from(stdout_read), std::fs::File::from(stderr_read))
}

fn wait(cell: &mut Cell, within: Duration) -> CellExit {
    let deadline = Instant::now() + within;
    loop {
        if let Some(exit) = cell.try_wait().unwrap() {
            return exit;
        }
        assert!(Instant::now() < deadline, "the cell did not end");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors we then own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both are fresh descriptors.
    unsafe {
        (std::os::fd::FromRawFd::from_raw_fd(fds[0]), std::os::fd::FromRawFd::from_raw_fd(fds[1]))
    }
}

fn read_all(mut file: std::fs::File) -> String {
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    text
}

#[track_caller]
fn lines(outcome: &Outcome) -> Vec<&str> {
    assert_eq!(outcome.exit, CellExit::Exited(0), "stderr: {}", outcome.stderr);
    outcome.stdout.lines().collect()
}

#[test]
fn this_machine_gives_every_layer() {
    let plan = plan(Options::default(), "pass");
    let containment = plan.containment();
    assert!(containment.is_complete(), "{containment}: {:?}", containment.missing());
    assert!(containment.landlock.is_some_and(|abi| abi >= 1));
}

#[test]
fn the_program_sees_a_minimal_root_and_its_own_processes() {
    let script = r#"
import os, socket
print(sorted(os.listdir("/")))
print(os.getpid(), os.getppid(), os.getuid(), os.geteuid())
print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print(socket.gethostname())
print(os.getcwd().startswith("/tmp/work-"), os.listdir("."))
print(open("/proc/self/environ").read().split("\0")[:-1])
print(os.path.exists("/proc/meminfo"), os.path.exists("/sys"), os.path.exists("/etc/passwd"))
"#;
    let outcome = run(script);
    let lines = lines(&outcome);
    assert!(
        lines[0].contains("'dev'") && lines[0].contains("'proc'") && lines[0].contains("'tmp'"),
        "{}",
        lines[0]
    );
    // `/etc` holds the loader's cache and the time zone only (checked below).
    for absent in ["'root'", "'home'", "'var'", "'sys'", "'boot'", "'srv'"] {
        assert!(!lines[0].contains(absent), "{} in {}", absent, lines[0]);
    }
    assert_eq!(
        lines[1], "2 1 1000 1000",
        "the program is PID 2 under our init, as the cell's user"
    );
    assert_eq!(lines[2], "[1, 2]", "only the cell's processes");
    assert_eq!(lines[3], "cell");
    assert_eq!(lines[4], "True []", "a fresh work directory");
    // Python adds LC_CTYPE to its own copy (PEP 538); the environment the cell was given is
    // `HOME`, its work directory, and nothing of the host's.
    assert!(lines[5].starts_with("['HOME=/tmp/work-") && !lines[5].contains(','), "{}", lines[5]);
    assert_eq!(lines[6], "False False False", "no host files through /proc, /sys or /etc");
}

#[test]
fn host_files_secrets_and_processes_are_out_of_reach() {
    // SAFETY: setting an environment variable of this test process, whose other threads read
    // none while the cell starts.
    unsafe { std::env::set_var("CODE_RUNTIME_TEST_SECRET", "hunter2") };
    let script = r#"
import os
found = []
for root in ("/proc",):
    for pid in os.listdir(root):
        try:
            found.append(open(f"/proc/{pid}/environ", "rb").read())
        except OSError:
            pass
print(any(b"hunter2" in e for e in found))
for path in ("/etc/shadow", "/root", "/home", "/proc/1/mem"):
    try:
        open(path, "rb").read(1)
        print(path, "readable")
    except OSError as e:
        print(path, type(e).__name__)
"#;
    let outcome = run(script);
    let lines = lines(&outcome);
    assert_eq!(lines[0], "False", "the host's environment is not readable");
    assert_eq!(lines[1], "/etc/shadow FileNotFoundError");
    assert_eq!(lines[2], "/root FileNotFoundError");
    assert_eq!(lines[3], "/home FileNotFoundError");
    assert_eq!(lines[4], "/proc/1/mem PermissionError", "the init is not dumpable");
}

#[test]
fn the_cells_init_shows_nothing_of_the_host_and_home_is_the_work_dir() {
    // The init is a copy of the host: its command line was the host's (a path, flags, perhaps a
    // secret), its name the cloning thread's. The program reads both, and its own outer uid.
    let script = r#"
import os, pathlib
print(repr(open("/proc/1/cmdline", "rb").read()))
print(open("/proc/1/comm").read().strip())
print(os.environ.get("HOME") == os.getcwd(), str(pathlib.Path.home()) == os.getcwd())
print(open("/proc/self/uid_map").read().split()[1] if os.path.exists("/proc/self/uid_map") else "-")
# The init becomes its image once the worker runs, which on a loaded machine may be a moment
# after the program starts: it is looked at until it has (or 5 s have passed).
import time
for _ in range(500):
    resident = int(open("/proc/1/statm").read().split()[1]) * 4
    if resident < 256:
        break
    time.sleep(0.01)
print(resident)
"#;
    let first = run(script);
    let lines = lines(&first);
    assert_eq!(lines[0], r"b'cell\x00'", "the host's command line does not show");
    assert_eq!(lines[1], "cell");
    assert_eq!(lines[2], "True True", "HOME is the work directory");
    if cfg!(target_arch = "x86_64") {
        // Once the worker runs, the init is the host's init image (`run_init.rs`), a page or
        // two resident, no longer the copy of the host it was cloned as.
        let resident: u64 = lines[4].parse().expect("the init's resident kB");
        assert!(resident < 256, "the init holds {resident} kB");
    }
    // As root, each cell maps its user to a uid of its own: consecutive cells' are unrelated
    // (no counter shows how many the host started).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let outer: Vec<u64> =
            (0..4).map(|_| lines_of(&run(script))[3].parse().expect("an outer uid")).collect();
        let steps: Vec<i64> = outer.windows(2).map(|w| w[1] as i64 - w[0] as i64).collect();
        assert!(steps.iter().any(|step| step.abs() > 16), "outer uids {outer:?} count up");
    }
}

fn lines_of(outcome: &Outcome) -> Vec<String> {
    lines(outcome).into_iter().map(str::to_owned).collect()
}

#[test]
fn a_granted_path_only_the_host_may_search_is_readable_and_nothing_else_beside_it() {
    // A directory of the host's user, closed to everyone else (a root host's interpreter under
    // `/root` is the case that matters): the cell's user is not the host's, yet it reads what it
    // was granted, and only that.
    use std::os::unix::fs::PermissionsExt;
    let private = std::env::temp_dir().join(format!("sandbox-private-{}", std::process::id()));
    let granted = private.join("granted");
    std::fs::create_dir_all(&granted).unwrap();
    std::fs::write(granted.join("data.txt"), "granted data").unwrap();
    std::fs::write(private.join("beside.txt"), "not granted").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let executable = python();
    let script = format!(
        "import os\nprint(open('{data}').read())\nprint(os.listdir('{private}'))\n\
         try:\n    open('{data}', 'a')\nexcept OSError as e:\n    print(type(e).__name__)",
        data = granted.join("data.txt").display(),
        private = private.display(),
    );
    let spec = CellSpec {
        args: vec![executable.clone().into(), "-I".into(), "-S".into(), "-c".into(), script.into()],
        read_only: vec![executable.clone(), granted.clone()],
        executable,
        options: Options::default(),
        machine_cache: None,
    };
    let plan = CellPlan::new(&spec).unwrap();
    let (mut cell, stdout, stderr) = start(&plan, CellLimits::new(256 << 20, 10));
    let exit = wait(&mut cell, Duration::from_secs(20));
    let outcome = Outcome { stdout: read_all(stdout), stderr: read_all(stderr), exit };
    std::fs::remove_dir_all(&private).unwrap();
    let lines = lines(&outcome);
    assert_eq!(lines[..2], ["granted data", "['granted']"]);
    // Read-only mount (EROFS) or the cell's user (EACCES), depending on who checks first.
    assert!(["OSError", "PermissionError"].contains(&lines[2]), "{}", lines[2]);
}

/// The environment variable naming a directory whose `sub` is a mount point of its own (a tmpfs
/// anyone may write), made by `cargo xtask unprivileged` for the unprivileged run, which cannot
/// mount on the host.
const SUBMOUNT_FIXTURE: &str = "CODE_RUNTIME_SUBMOUNT_FIXTURE";

/// A directory with a writable tmpfs mounted at its `sub`, unmounted and removed on drop when this
/// process made it.
struct Submount {
    dir: PathBuf,
    owned: bool,
}

impl Submount {
    /// The fixture `cargo xtask unprivileged` made, or one made here as root; `None` for an
    /// unprivileged developer's run, which has no way to mount on the host.
    fn get() -> Option<Self> {
        if let Some(dir) = std::env::var_os(SUBMOUNT_FIXTURE) {
            return Some(Self { dir: dir.into(), owned: false });
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let dir = std::env::temp_dir().join(format!("sandbox-submount-{}", std::process::id()));
        let sub = dir.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let path = std::ffi::CString::new(sub.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mount with NUL-terminated strings.
        let mounted = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                path.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                c"size=1m,mode=1777".as_ptr().cast(),
            )
        };
        assert_eq!(mounted, 0, "mounting the fixture: {}", std::io::Error::last_os_error());
        Some(Self { dir, owned: true })
    }
}

impl Drop for Submount {
    fn drop(&mut self) {
        if self.owned {
            let sub = std::ffi::CString::new(self.dir.join("sub").as_os_str().as_encoded_bytes());
            // SAFETY: umount2 with a NUL-terminated string.
            unsafe { libc::umount2(sub.unwrap().as_ptr(), libc::MNT_DETACH) };
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[test]
#[expect(clippy::print_stderr, reason = "says why the test did nothing, when it cannot")]
fn a_granted_path_is_read_only_with_every_mount_beneath_it() {
    // A host path granted read-only may have mounts beneath it; each is as read-only as the path.
    // Landlock is off: the mounts alone must hold (a 1777 tmpfs the cell's user may write).
    let Some(fixture) = Submount::get() else {
        // An unprivileged developer's own run; CI runs this as root and through `cargo xtask
        // unprivileged`, which both have a fixture.
        eprintln!("skipped: needs root, or {SUBMOUNT_FIXTURE} (cargo xtask unprivileged sets it)");
        return;
    };
    let executable = python();
    let script = format!(
        "import os\nfor path in ('{dir}', '{dir}/sub'):\n    \
         print(bool(os.statvfs(path).f_flag & os.ST_RDONLY))\n\
         try:\n    open('{dir}/sub/planted', 'w')\n    print('written')\n\
         except OSError as e:\n    print(os.strerror(e.errno))",
        dir = fixture.dir.display(),
    );
    let spec = CellSpec {
        args: vec![executable.clone().into(), "-I".into(), "-S".into(), "-c".into(), script.into()],
        read_only: vec![executable.clone(), fixture.dir.clone()],
        executable,
        options: Options { landlock: false, ..Options::default() },
        machine_cache: None,
    };
    let plan = CellPlan::new(&spec).unwrap();
    let (mut cell, stdout, stderr) = start(&plan, CellLimits::new(256 << 20, 10));
    let exit = wait(&mut cell, Duration::from_secs(20));
    let outcome = Outcome { stdout: read_all(stdout), stderr: read_all(stderr), exit };
    assert_eq!(lines(&outcome), ["True", "True", "Read-only file system"]);
}

#[test]
fn writes_outside_tmp_are_refused_and_tmp_is_bounded() {
    let script = r#"
import os
for path in ("/outside", "/usr/lib/planted", "/dev/planted", "/proc/planted"):
    try:
        open(path, "w").write("x")
        print(path, "written")
    except OSError as e:
        print(path, type(e).__name__)
open("/tmp/fine", "w").write("x")
open("/dev/shm/fine", "w").write("x")
try:
    with open("/tmp/big", "wb") as f:
        for _ in range(64):
            f.write(b"x" * (1 << 20))
    print("64 MiB written")
except OSError as e:
    print("big", e.errno)
"#;
    let outcome = run_with(Options::default(), CellLimits::new(32 << 20, 10), script);
    let lines = lines(&outcome);
    assert_eq!(lines[0], "/outside OSError");
    assert_eq!(lines[1], "/usr/lib/planted OSError");
    assert!(lines[2].starts_with("/dev/planted") && !lines[2].ends_with("written"), "{}", lines[2]);
    assert!(!lines[3].ends_with("written"), "{}", lines[3]);
    assert!(
        lines[4] == format!("big {}", libc::ENOSPC) || lines[4] == format!("big {}", libc::EFBIG),
        "{}",
        lines[4]
    );
}

#[test]
fn there_is_no_network_at_all() {
    let script = r#"
import socket
results = []
for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_INET6, socket.SOCK_STREAM), (socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_NETLINK, socket.SOCK_RAW)):
    try:
        socket.socket(family, kind)
        results.append("open")
    except OSError as e:
        results.append(e.errno)
print(results)
try:
    socket.getaddrinfo("example.com", 80)
    print("resolved")
except OSError:
    print("no dns")
a, b = socket.socketpair()
a.send(b"unix ok")
print(b.recv(16).decode())
"#;
    let outcome = run(script);
    let lines = lines(&outcome);
    assert_eq!(lines[0], format!("[{e}, {e}, {e}, {e}, {e}]", e = libc::EPERM));
    assert_eq!(lines[1], "no dns");
    assert_eq!(lines[2], "unix ok", "Unix sockets work");
}

#[test]
fn privileged_calls_are_refused() {
    let script = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    result = getattr(libc, name)(*args)
    return 0 if result == 0 else ctypes.get_errno()
print(call("mount", b"none", b"/tmp", b"tmpfs", 0, None))
print(call("unshare", 0x10000000))  # CLONE_NEWUSER
print(call("unshare", 0x00020000))  # CLONE_NEWNS
print(call("ptrace", 16, 1, None, None))  # PTRACE_ATTACH to the init
print(call("chroot", b"/tmp"))
print(call("sethostname", b"x", 1))
"#;
    let outcome = run(script);
    let eperm = libc::EPERM.to_string();
    assert_eq!(lines(&outcome), [eperm.as_str(); 6]);
}

#[test]
fn the_programs_own_signals_work_and_end_the_cell() {
    let outcome = run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)");
    assert_eq!(outcome.exit, CellExit::Exited(128 + libc::SIGKILL));
    // kill(-1) spares the caller and the init: it reaches the program's other processes, and no
    // process outside the cell (this test's own `sleep` is one).
    #[expect(clippy::disallowed_methods, reason = "a host process, outside any cell")]
    let mut outside = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let script = r#"
import os, signal, time
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
os.kill(-1, signal.SIGKILL)
_, status = os.waitpid(child, 0)
print(os.WIFSIGNALED(status) and os.WTERMSIG(status))
"#;
    let outcome = run(script);
    let alive = outside.try_wait().unwrap().is_none();
    outside.kill().unwrap();
    outside.wait().unwrap();
    assert_eq!(lines(&outcome), [libc::SIGKILL.to_string()], "the program's own child was killed");
    assert!(alive, "a process outside the cell survived kill(-1)");
}

#[test]
fn nothing_outlives_the_cell() {
    // A daemon: double fork, new session, ignore every signal it can, hold the channel.
    let script = r#"
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        while True:
            time.sleep(1)
    os._exit(0)
print(os.stat("/proc/self/ns/pid").st_ino, flush=True)
time.sleep(60)
"#;
    let plan = plan(Options::default(), script);
    let (mut cell, stdout, _stderr) = start(&plan, CellLimits::new(256 << 20, 10));
    // The namespace's inode, as the program sees it: the host may not look into the cell's init.
    let mut first = String::new();
    std::io::BufReader::new(stdout).read_line(&mut first).unwrap();
    let namespace: u64 = first.trim().parse().expect("the namespace's inode");
    let usage = cell.usage();
    assert!(usage.processes >= 2, "the daemon is counted: {usage:?}");
    // The scan below sees the cell's processes (so finding none later means something).
    assert!(processes_in(namespace).len() >= 2, "the program and its daemon are visible");
    cell.kill();
    assert_eq!(wait(&mut cell, Duration::from_secs(10)), CellExit::Killed(libc::SIGKILL));
    assert!(processes_in(namespace).is_empty(), "a process of the cell survived");
}

#[test]
fn a_host_kill_reads_as_a_kill_and_never_replaces_a_status_the_init_left() {
    // A kill races the init: it may reap the killed worker and exit with `128 + SIGKILL` before
    // its own SIGKILL lands. Whichever wins, the host reads its own kill, never a program status
    // (which, near the CPU budget, would read as the CPU limit).
    for _ in 0..20 {
        let plan = plan(Options::default(), "import time; print('up', flush=True); time.sleep(30)");
        let (mut cell, stdout, _stderr) = start(&plan, CellLimits::new(256 << 20, 10));
        std::io::BufReader::new(stdout).read_line(&mut String::new()).unwrap();
        cell.kill();
        let exit = wait(&mut cell, Duration::from_secs(10));
        assert_eq!(exit, CellExit::Killed(libc::SIGKILL));
        assert!(!exit.by_cpu_limit(Duration::from_secs(10), Duration::from_secs(10)));
    }
    // An init that already ended holds the program's status; a kill before the reap keeps it
    // (a host that waited for the exit reads it, then kills to be sure).
    let plan = plan(Options::default(), "import os; os._exit(128 + 9)");
    let (mut cell, _stdout, _stderr) = start(&plan, CellLimits::new(256 << 20, 10));
    let mut ended = libc::pollfd { fd: cell.pidfd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: poll on one pidfd we hold.
    assert_eq!(unsafe { libc::poll(&mut ended, 1, 10_000) }, 1, "the init ended");
    cell.kill();
    assert_eq!(wait(&mut cell, Duration::from_secs(10)), CellExit::Exited(128 + libc::SIGKILL));
}

/// Host pids of the processes in the PID namespace `namespace`.
fn processes_in(namespace: u64) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|entry| {
            std::fs::metadata(entry.path().join("ns/pid")).is_ok_and(|m| m.ino() == namespace)
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_host_counts_the_whole_cell() {
    // Four processes that each spin until they have used 0.5 s of CPU of their own (CPU time,
    // not wall time: on a loaded machine they take longer, never less): the cell's CPU time is
    // theirs together, the three reaped children's through the worker's children's times.
    let script = r#"
import os, time
def spin():
    while time.process_time() < 0.5:
        pass
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        spin()
        os._exit(0)
    children.append(pid)
blob = bytearray(48 << 20)
for i in range(0, len(blob), 4096):
    blob[i] = 1
print("busy", flush=True)
spin()
for pid in children:
    os.waitpid(pid, 0)
print("done", flush=True)
time.sleep(30)
"#;
    let plan = plan(Options::default(), script);
    let (mut cell, mut stdout, _stderr) = start(&plan, CellLimits::new(256 << 20, 30));
    let mut line = [0u8; 5];
    stdout.read_exact(&mut line).unwrap();
    assert_eq!(&line, b"busy\n");
    let usage = cell.usage();
    assert!(usage.memory_bytes >= 48 << 20, "the worker's memory is counted: {usage:?}");
    stdout.read_exact(&mut line).unwrap();
    assert_eq!(&line, b"done\n");
    let usage = cell.usage();
    // Four times 0.5 s; reaped children's time is read in 10 ms clock ticks, rounded down, so
    // the sum may fall a little short of 2 s. Three processes alone could not pass 1.5 s.
    assert!(usage.cpu >= Duration::from_millis(1800), "CPU of every process counts: {usage:?}");
    cell.kill();
    wait(&mut cell, Duration::from_secs(10));
}

#[test]
fn shared_memory_counts_and_memory_no_process_maps_cannot_be_made() {
    // Four processes each map 64 MB shared and anonymous: resident minus shared counts none of
    // it, their proportional share counts all of it. A memfd written and never mapped, a System
    // V segment detached again, a message queue: refused, as no process's memory would show
    // them.
    let script = r#"
import ctypes, mmap, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
try:
    os.memfd_create("x")
    print("memfd made", flush=True)
except OSError as error:
    print("memfd refused", error.errno, flush=True)
for name, call in (("shmget", lambda: libc.shmget(0, 64 << 20, 0o1000 | 0o600)),
                   ("msgget", lambda: libc.msgget(0, 0o1000 | 0o600))):
    made = call() >= 0
    print(name, "made" if made else "refused", ctypes.get_errno(), flush=True)
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        shared = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_SHARED)
        for i in range(0, len(shared), 4096):
            shared[i] = 1
        print("mapped", flush=True)
        time.sleep(30)
        os._exit(0)
    children.append(pid)
time.sleep(30)
"#;
    let plan = plan(Options::default(), script);
    let (mut cell, stdout, _stderr) = start(&plan, CellLimits::new(512 << 20, 30));
    let mut lines = std::io::BufReader::new(stdout).lines();
    let eperm = libc::EPERM;
    assert_eq!(lines.next().unwrap().unwrap(), format!("memfd refused {eperm}"));
    assert_eq!(lines.next().unwrap().unwrap(), format!("shmget refused {eperm}"));
    assert_eq!(lines.next().unwrap().unwrap(), format!("msgget refused {eperm}"));
    for _ in 0..4 {
        assert_eq!(lines.next().unwrap().unwrap(), "mapped");
    }
    let held = cell.memory();
    assert!(held >= 4 * (64 << 20), "the shared mappings count: {held} bytes");
    assert!(cell.usage().resident_bytes >= held, "resident memory bounds it from above");
    cell.kill();
    wait(&mut cell, Duration::from_secs(10));
}

#[test]
fn a_zombie_does_not_charge_the_pages_its_family_shares() {
    // 64 MB written, then shared by eight forks; a ninth ends and is left unreaped. The zombie
    // has no memory map to read: it counts as nothing, not as the cell's private memory over
    // again (which would charge the shared pages nine times).
    let script = r#"
import os, time
held = bytearray(64 << 20)
for i in range(0, len(held), 4096):
    held[i] = 1
for _ in range(8):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
zombie = os.fork()
if zombie == 0:
    os._exit(0)
while open("/proc/%d/stat" % zombie).read().rsplit(")", 1)[1].split()[0] != "Z":
    time.sleep(0.01)
print("ready", flush=True)
time.sleep(30)
"#;
    let plan = plan(Options::default(), script);
    let (mut cell, stdout, _stderr) = start(&plan, CellLimits::new(512 << 20, 30));
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let held = cell.memory();
    assert!(held >= 64 << 20, "the pages count once: {held} bytes");
    assert!(held < 2 * (64 << 20), "and only once: {held} bytes");
    cell.kill();
    wait(&mut cell, Duration::from_secs(10));
}

#[test]
fn an_orphans_cpu_time_counts_after_it_ends() {
    // A grandchild re-parented to the init spends a second of CPU and ends: the init reaped it,
    // and its time still counts.
    let script = r#"
import os, time
if os.fork() == 0:
    if os.fork() == 0:
        while time.process_time() < 1.0:
            pass
        os._exit(0)
    os._exit(0)
os.wait()
while sum(p.isdigit() for p in os.listdir("/proc")) > 2:  # the init and this process
    time.sleep(0.05)
print("done", flush=True)
time.sleep(30)
"#;
    let plan = plan(Options::default(), script);
    let (mut cell, stdout, _stderr) = start(&plan, CellLimits::new(256 << 20, 30));
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    let usage = cell.usage();
    assert_eq!(usage.processes, 1, "only the program is left: {usage:?}");
    assert!(usage.cpu >= Duration::from_millis(950), "the orphan's time counts: {usage:?}");
    cell.kill();
    wait(&mut cell, Duration::from_secs(10));
}

#[test]
fn a_fork_bomb_stops_at_the_process_limit() {
    let script = r#"
import os
count = 0
try:
    while count < 1000:
        if os.fork() == 0:
            import time
            time.sleep(30)
            os._exit(0)
        count += 1
except OSError as e:
    print("refused after", count, e.errno)
"#;
    let limits = CellLimits { processes: 16, ..CellLimits::new(256 << 20, 10) };
    let plan = plan(Options::default(), script);
    let (mut cell, stdout, _stderr) = start(&plan, limits);
    let deadline = Instant::now() + Duration::from_secs(20);
    while cell.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(cell.try_wait().unwrap().is_some(), "the worker ended");
    let text = read_all(stdout);
    assert!(text.starts_with("refused after"), "{text}");
    let count: usize = text.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(count < 16, "{count} processes started");
}

#[test]
fn without_namespaces_landlock_still_fences_files_and_network() {
    let options = Options { namespaces: false, ..Options::default() };
    let script = r#"
import os, socket
for path in ("/etc/hostname", "/proc/self/status", "/root", "/tmp"):
    try:
        os.listdir(path) if os.path.isdir(path) else open(path).read(1)
        print(path, "readable")
    except OSError as e:
        print(path, type(e).__name__)
open("mine", "w").write("x")
print(os.listdir("."))
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
except OSError as e:
    print("inet", e.errno)
"#;
    let outcome = run_with(options, CellLimits::new(256 << 20, 10), script);
    let lines = lines(&outcome);
    assert_eq!(lines[0], "/etc/hostname PermissionError");
    assert_eq!(lines[1], "/proc/self/status PermissionError");
    assert_eq!(lines[2], "/root PermissionError");
    assert_eq!(lines[3], "/tmp PermissionError");
    assert_eq!(lines[4], "['mine']", "the work directory is writable");
    assert_eq!(lines[5], format!("inet {}", libc::EPERM));
}

#[test]
fn a_watched_cell_reports_its_end_keeps_its_cpu_time_and_is_reaped() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let script = "import time\nwhile time.process_time() < 0.3:\n    pass\nprint('spent', flush=True)\ntime.sleep(30)";
    let plan = plan(Options::default(), script);
    let (cell, mut stdout, _stderr) = start(&plan, CellLimits::new(256 << 20, 30));
    let pid = cell.pid();
    let mut watched = runtime.block_on(async { WatchedCell::new(cell) }).expect("watched");
    let mut spent = [0u8; 5];
    stdout.read_exact(&mut spent).unwrap();
    assert!(watched.is_alive());
    assert!(!runtime.block_on(watched.wait_exit(Duration::from_millis(50))), "still running");
    assert!(watched.memory_used() > 0);
    watched.kill();
    assert!(runtime.block_on(watched.wait_exit(Duration::from_secs(10))), "killed, it ends");
    assert_eq!(runtime.block_on(watched.reap()), Some(CellExit::Killed(libc::SIGKILL)));
    assert!(!watched.is_alive());
    // Read when it was killed, kept after it is gone.
    assert!(watched.cpu_used() >= Duration::from_millis(300), "{:?}", watched.cpu_used());
    assert_eq!(watched.memory_used(), 0);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "reaped, not a zombie");
}

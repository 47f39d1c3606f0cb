//! Programs that try to reach the host, tried as an attacker would: its files, its `/proc`, other
//! runs, the network, writes outside the work directory, processes that outlive the run, and
//! resources spent through children. Each test asserts the result and that nothing leaked
//! (processes, files, mounts). CI runs them as root and as an unprivileged user.

use code_runtime::FailureKind;
use code_runtime::json;

use crate::*;

/// The host as a run left it: its mount table, and no file named `token` in any place a program
/// might write to. Taken before a run, checked after.
struct HostView {
    mounts: String,
    token: String,
}

/// Where a program would plant files on the host if it could.
fn planting_grounds() -> Vec<std::path::PathBuf> {
    let mut places: Vec<std::path::PathBuf> =
        ["/tmp", "/dev/shm", "/var/tmp", "/root", "/"].iter().map(Into::into).collect();
    places.push(std::env::temp_dir());
    places.extend(std::env::current_dir().ok());
    places
}

impl HostView {
    fn now(name: &str) -> Self {
        let token = format!("planted-{name}-{}", std::process::id());
        Self { mounts: mount_table(), token }
    }

    /// A Python list of the paths a program should try to write.
    fn targets(&self) -> String {
        let paths: Vec<String> = planting_grounds()
            .iter()
            .map(|dir| dir.join(&self.token).display().to_string())
            .collect();
        format!("{paths:?}")
    }

    /// Nothing of the run is left: no process of `namespace`, no planted file, no mount.
    #[track_caller]
    fn assert_unchanged(&self, namespace: Option<u64>) {
        if let Some(namespace) = namespace {
            assert_gone(namespace);
        }
        for dir in planting_grounds() {
            let planted = dir.join(&self.token);
            assert!(!planted.exists(), "{} was planted on the host", planted.display());
        }
        assert_eq!(mount_table(), self.mounts, "the host's mount table changed");
    }
}

fn mount_table() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap()
}

#[test]
fn the_hosts_secrets_and_proc_are_out_of_reach() {
    let view = HostView::now("proc");
    let host = std::process::id();
    let path = std::env::var("PATH").unwrap_or_default();
    assert!(!path.is_empty(), "the test needs a PATH to look for");
    let program = format!(
        r#"{ANNOUNCE}
import os
found = []
for pid in os.listdir("/proc"):
    try:
        found.append(open(f"/proc/{{pid}}/environ", "rb").read())
    except OSError:
        pass
tried = {{}}
for path, mode in [(f"/proc/{host}/environ", "rb"), (f"/proc/{host}/mem", "r+b"),
                   (f"/proc/{host}/fd/1", "wb"), ("/proc/1/mem", "rb"), ("/proc/1/environ", "rb"),
                   ("/etc/shadow", "rb"), ("/etc/passwd", "rb"), ("/etc/hostname", "rb"),
                   ("/proc/meminfo", "rb"), ("/sys/kernel/notes", "rb")]:
    try:
        with open(path, mode) as f:
            if "w" in mode:
                f.write(b'{{"logs":[],"value":"forged"}}\n')
        tried[path] = "opened"
    except OSError as e:
        tried[path] = type(e).__name__
return {{
    "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "secret": any({path:?}.encode() in e for e in found),
    "tried": tried,
}}
"#
    );
    let announced = Announced::default();
    let result = run(&program, vec![announced.namespace()]);
    let value = value(&result);
    assert_eq!(value["pids"], json!(["1", "2"]), "only the cell's init and program");
    assert_eq!(value["secret"], json!(false), "the host's environment is unreadable");
    let missing = "FileNotFoundError";
    assert_eq!(
        value["tried"],
        json!({
            format!("/proc/{host}/environ"): missing,
            format!("/proc/{host}/mem"): missing,
            format!("/proc/{host}/fd/1"): missing,
            "/proc/1/mem": "PermissionError",
            "/proc/1/environ": "PermissionError",
            "/etc/shadow": missing,
            "/etc/passwd": missing,
            "/etc/hostname": missing,
            "/proc/meminfo": missing,
            "/sys/kernel/notes": missing,
        })
    );
    view.assert_unchanged(announced.get());
}

#[test]
fn another_runs_memory_and_processes_are_out_of_reach() {
    // Run A holds a secret and waits; run B, given A's host pids, looks for it.
    let (announce_tx, announce_rx) = tokio::sync::oneshot::channel::<u64>();
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let announce_tx = std::sync::Mutex::new(Some(announce_tx));
    let holder = {
        let release = release.clone();
        CodeBindingNamespace::new("holder").function(
            "hold",
            binding(move |args| {
                if let Some(tx) = announce_tx.lock().unwrap().take() {
                    let _ = tx.send(args.as_u64().unwrap_or(0));
                }
                let release = release.clone();
                async move {
                    release.notified().await;
                    Ok(json!(null))
                }
            }),
        )
    };
    let program_a = "import os\nsecret = 'run-a-secret-' + '7' * 20\nawait holder.hold(os.stat('/proc/self/ns/pid').st_ino)\nreturn len(secret)";
    let (a, b) = tokio().block_on(async {
        let a = tokio::spawn(default_runtime().run(CodeRunRequest::new(program_a).binding(holder)));
        let namespace = announce_rx.await.unwrap();
        let pids: Vec<String> = host_pids_in(namespace);
        assert!(!pids.is_empty(), "the host sees run A");
        let program_b = format!(
            r#"
import os
seen = sorted(p for p in os.listdir("/proc") if p.isdigit())
tried = []
for pid in {pids:?}:
    for what in ("mem", "environ", "cmdline"):
        try:
            open(f"/proc/{{pid}}/{{what}}", "rb").read()
            tried.append("opened")
        except OSError as e:
            tried.append(type(e).__name__)
return [seen, sorted(set(tried))]
"#
        );
        let b = default_runtime().run(CodeRunRequest::new(program_b)).await.unwrap();
        release.notify_one();
        (a.await.unwrap().unwrap(), b)
    });
    assert_eq!(value(&a), &json!(33));
    assert_eq!(value(&b), &json!([["1", "2"], ["FileNotFoundError"]]));
}

#[test]
fn writes_land_only_in_the_cells_own_tmp_and_leave_nothing() {
    let view = HostView::now("writes");
    let program = format!(
        r#"{ANNOUNCE}
import os
wrote = {{}}
for path in {targets} + ["/usr/lib/planted", "/dev/planted", "/proc/planted", "planted-here"]:
    try:
        with open(path, "w") as f:
            f.write("x")
        wrote[path] = "wrote"
    except OSError as e:
        wrote[path] = type(e).__name__
# An immutable file would outlive a host's clean-up of the work directory.
import fcntl, struct
with open("sticky", "w") as f:
    try:
        fcntl.ioctl(f.fileno(), 0x40086602, struct.pack("l", 0x10))  # FS_IOC_SETFLAGS, immutable
        wrote["immutable"] = "set"
    except OSError as e:
        wrote["immutable"] = type(e).__name__
return [os.getcwd().startswith("/tmp/work-"), wrote]
"#,
        targets = view.targets()
    );
    let announced = Announced::default();
    let result = run(&program, vec![announced.namespace()]);
    let value = value(&result);
    assert_eq!(value[0], json!(true), "the work directory is in the cell's /tmp");
    assert_ne!(value[1]["immutable"], json!("set"), "no capability to make a file immutable");
    for (path, outcome) in value[1].as_object().unwrap() {
        if path == "immutable" {
            continue;
        }
        // What lands directly in the cell's own /tmp or /dev/shm, or in the work directory.
        let parent = std::path::Path::new(path).parent().and_then(std::path::Path::to_str);
        let private = matches!(parent, Some("/tmp" | "/dev/shm" | ""));
        let expected = if private { "wrote" } else { "not written" };
        let got = if outcome == "wrote" { "wrote" } else { "not written" };
        assert_eq!(got, expected, "{path}: {outcome}");
    }
    view.assert_unchanged(announced.get());
}

#[test]
fn each_run_gets_a_fresh_private_tmp_whatever_the_last_one_planted() {
    // The first run plants what could trouble the next: a guess at its work directory, a file
    // without write permission, a full /dev/shm.
    let first = r#"
import os
for name in ("work-0000000000000000", "work-ffffffffffffffff"):
    os.mkdir("/tmp/" + name)
open("/tmp/locked", "w").write("x")
os.chmod("/tmp/locked", 0)
open("/dev/shm/left", "wb").write(b"x" * (1 << 20))
return os.getcwd()
"#;
    let first_cwd = value(&run(first, vec![])).clone();
    let second = "import os\nreturn [os.getcwd(), os.listdir('.'), sorted(os.listdir('/tmp')), os.listdir('/dev/shm')]";
    let second = value(&run(second, vec![])).clone();
    assert_ne!(second[0], first_cwd, "work directory names are not reused");
    assert_eq!(second[1], json!([]));
    let own = second[0].as_str().unwrap().trim_start_matches("/tmp/");
    assert_eq!(second[2], json!([".shm", own]), "only its own work directory");
    assert_eq!(second[3], json!([]));
}

#[test]
fn there_is_no_network() {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let (tcp_port, udp_port) = (tcp.local_addr().unwrap().port(), udp.local_addr().unwrap().port());
    let program = format!(
        r#"
import socket
out = {{}}
def attempt(name, action):
    try:
        action()
        out[name] = "ok"
    except OSError as e:
        out[name] = e.errno
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {tcp_port}), timeout=2))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp_port})))
attempt("tcp6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))
try:
    socket.getaddrinfo("localhost", 80)
    out["dns"] = "ok"
except socket.gaierror:
    out["dns"] = "failed"
attempt("unix", lambda: socket.socketpair())
return out
"#
    );
    let result = run(&program, vec![]);
    let eperm = libc::EPERM;
    assert_eq!(
        value(&result),
        &json!({
            "tcp": eperm, "udp": eperm, "tcp6": eperm, "packet": eperm, "netlink": eperm,
            "dns": "failed", "unix": "ok",
        })
    );
    assert!(tcp.accept().is_err(), "nothing connected to the host's listener");
    let mut buffer = [0u8; 8];
    assert!(udp.recv(&mut buffer).is_err(), "nothing reached the host's UDP socket");
}

#[test]
fn mounts_namespaces_and_cgroup_release_agents_are_refused() {
    let view = HostView::now("mounts");
    let program = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    return 0 if getattr(libc, name)(*args) == 0 else ctypes.get_errno()
return [
    call("mount", b"none", b"/tmp", b"tmpfs", 0, None),
    call("mount", b"cgroup", b"/tmp", b"cgroup", 0, b"none,name=escape"),
    call("unshare", 0x10000000 | 0x00020000),  # CLONE_NEWUSER | CLONE_NEWNS
    call("setns", 0, 0),
    call("chroot", b"/tmp"),
    call("ptrace", 16, 1, None, None),  # PTRACE_ATTACH to the init
]
"#;
    let result = run(program, vec![]);
    let eperm = libc::EPERM;
    assert_eq!(value(&result), &json!([eperm, eperm, eperm, eperm, eperm, eperm]));
    view.assert_unchanged(None);
}

#[test]
fn the_host_and_the_init_cannot_be_signalled() {
    let host = std::process::id();
    let program = format!(
        r#"
import os, signal
out = []
for pid in ({host}, 1, -1):
    try:
        os.kill(pid, signal.SIGKILL)
        out.append("sent")
    except OSError as e:
        out.append(type(e).__name__)
return out
"#
    );
    // The host is not in the cell's namespace. The init ignores signals from inside it, and
    // Landlock (ABI 6) refuses them outright. kill(-1) spares the caller and the init, so it
    // finds nobody to signal.
    let result = run(&program, vec![]);
    let outcome = value(&result).as_array().unwrap().clone();
    assert_eq!(outcome[0], json!("ProcessLookupError"));
    assert!(outcome[1] == json!("PermissionError") || outcome[1] == json!("sent"), "{outcome:?}");
    assert_eq!(outcome[2], json!("ProcessLookupError"));
}

#[test]
fn a_daemon_that_kills_its_supervisor_and_holds_fd_3_does_not_outlive_the_run() {
    let view = HostView::now("daemon");
    let program = format!(
        r#"
import os, signal, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        try:
            os.kill(1, signal.SIGKILL)
        except OSError:
            pass
        os.write(w, b"x")
        while True:
            time.sleep(1)
    os._exit(0)
os.read(r, 1)
{ANNOUNCE}
return seen
"#
    );
    let announced = Announced::default();
    let limits = Limits { max_wall_ms: 20_000, ..Limits::default() };
    let result =
        run_on(&runtime(limits), CodeRunRequest::new(program).binding(announced.namespace()));
    let seen = value(&result).as_u64().unwrap();
    assert!(seen >= 2, "the host saw the program and its daemon ({seen})");
    view.assert_unchanged(announced.get());
}

#[test]
fn cpu_spent_in_children_counts() {
    // Two children spin while the program sleeps: the cell's CPU time ends the run.
    let limits = Limits { compute_ms: 1_000, max_wall_ms: 30_000, ..Limits::default() };
    let program = format!(
        "{ANNOUNCE}import time\nfor _ in range(2):\n    if os.fork() == 0:\n        while True:\n            pass\ntime.sleep(60)"
    );
    let announced = Announced::default();
    let result =
        run_on(&runtime(limits), CodeRunRequest::new(program).binding(announced.namespace()));
    assert_eq!(
        failure(&result),
        Some(("timeout", "compute budget exhausted (1000ms busy)".to_owned()))
    );
    HostView::now("cpu").assert_unchanged(announced.get());
}

#[test]
fn memory_spent_in_children_counts() {
    // Six children of 200 MB each, every one under its own address-space limit, on a 512 MB
    // budget: the whole cell's memory ends the run.
    let limits = Limits { max_memory_mb: 512, max_wall_ms: 30_000, ..Limits::default() };
    let program = format!(
        r#"{ANNOUNCE}
import time
for _ in range(6):
    if os.fork() == 0:
        block = bytearray(200 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(60)
time.sleep(60)
"#
    );
    let announced = Announced::default();
    let result =
        run_on(&runtime(limits), CodeRunRequest::new(program).binding(announced.namespace()));
    assert_eq!(
        failure(&result),
        Some((
            "worker-exit",
            "worker error: out of memory: the program exceeded its 512 MB memory budget".to_owned()
        ))
    );
    HostView::now("memory").assert_unchanged(announced.get());
}

#[test]
fn the_process_count_is_bounded() {
    let program = format!(
        r#"{ANNOUNCE}
import time
started = 0
try:
    for _ in range(1000):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        started += 1
except OSError as e:
    return [started, e.errno]
return [started, None]
"#
    );
    let announced = Announced::default();
    let result = run(&program, vec![announced.namespace()]);
    let value = value(&result);
    let started = value[0].as_u64().unwrap();
    assert!(started < u64::from(code_runtime_python::DEFAULT_MAX_PROCESSES), "{value}");
    assert_eq!(value[1], json!(libc::EAGAIN), "fork fails with EAGAIN at the limit");
    HostView::now("processes").assert_unchanged(announced.get());
}

#[test]
fn files_cannot_outgrow_the_memory_budget() {
    // /dev/shm and /tmp are one tmpfs the size of the budget, and its pages count against it.
    let limits = Limits { max_memory_mb: 256, max_wall_ms: 30_000, ..Limits::default() };
    let program = r#"
written = 0
chunk = b"x" * (16 << 20)
try:
    with open("/dev/shm/fill", "wb") as f:
        for _ in range(64):
            f.write(chunk)
            f.flush()
            written += 1
except OSError as e:
    return [written, e.errno]
return [written, None]
"#;
    let result = run_on(&runtime(limits), CodeRunRequest::new(program));
    // Either the file system is full first (ENOSPC), or the file reaches the file-size limit, which
    // is the budget too (EFBIG, when the tmpfs still had room for the budget's last page), or the
    // whole cell's memory is over budget. No file gets past 256 MiB.
    match result.error() {
        None => {
            let value = value(&result);
            assert!(value[0].as_u64().unwrap() <= 16, "{value}");
            assert!([json!(libc::ENOSPC), json!(libc::EFBIG)].contains(&value[1]), "{value}");
        }
        Some(error) => {
            assert_eq!(error.kind(), FailureKind::WorkerExit, "{}", result.to_json());
            assert!(error.message().contains("out of memory"), "{}", error.message());
        }
    }
    assert!(!std::path::Path::new("/dev/shm/fill").exists());
}

#[test]
fn nothing_is_left_after_a_run_that_times_out_mid_fork_storm() {
    let limits = Limits { compute_ms: 2_000, max_wall_ms: 5_000, ..Limits::default() };
    let program = format!("{ANNOUNCE}for _ in range(5):\n    os.fork()\nwhile True:\n    pass");
    let announced = Announced::default();
    let result =
        run_on(&runtime(limits), CodeRunRequest::new(program).binding(announced.namespace()));
    assert_eq!(
        result.error().map(|e| e.kind()),
        Some(FailureKind::Timeout),
        "{}",
        result.to_json()
    );
    HostView::now("storm").assert_unchanged(announced.get());
}

#[test]
fn home_is_the_work_directory_and_the_init_shows_nothing_of_the_host() {
    // CPython's test suites failed only where they asked for the home directory; a package that
    // writes a cache under `~` needs one too. It is the run's own work directory.
    let program = r#"
import os, pathlib
home = pathlib.Path.home()
(home / ".cache").mkdir()
(home / ".cache" / "x").write_text("kept")
return [str(home) == os.getcwd(), os.path.expanduser("~") == os.getcwd(),
        (home / ".cache" / "x").read_text(), open("/proc/1/cmdline", "rb").read().decode()]
"#;
    let result = run(program, vec![]);
    assert_eq!(value(&result), &json!([true, true, "kept", "cell\u{0}"]));
}

#[test]
fn memory_no_budget_saw_is_counted_or_cannot_be_made() {
    // Ten processes that each map 48 MB shared and anonymous hold 480 MB under a 128 MB budget:
    // resident-minus-shared counted none of it; the cell's proportional share counts all of it.
    let runtime = runtime(Limits { max_memory_mb: 128, ..Limits::default() });
    let program = r#"
import mmap, os, time
for _ in range(10):
    if os.fork() == 0:
        shared = mmap.mmap(-1, 48 << 20, flags=mmap.MAP_SHARED)
        for i in range(0, len(shared), 4096):
            shared[i] = 1
        time.sleep(30)
        os._exit(0)
time.sleep(30)
"#;
    let (kind, message) = failure(&run_on(&runtime, CodeRunRequest::new(program))).unwrap();
    assert_eq!(kind, "worker-exit");
    assert!(message.contains("out of memory"), "{message}");
    // A memfd written and never mapped held 2.5 GB under 64 MB: it cannot be made.
    let program = r#"
import os
try:
    os.memfd_create("x")
    return "made"
except OSError as error:
    return error.strerror
"#;
    assert_eq!(
        value(&run_on(&runtime, CodeRunRequest::new(program))),
        &json!("Operation not permitted")
    );
}

//! The zygote (code-runtime-sandbox's `Zygote`): runs fork from one interpreter started ahead,
//! and nothing of one run, or of the zygote, reaches another.

use code_runtime::json;

use super::*;

#[test]
fn runs_fork_from_a_zygote_where_the_machine_gives_user_namespaces() {
    let runtime = default_runtime();
    assert!(runtime.containment().zygote, "{:?}", runtime.containment());
    let result = run("return open('/proc/self/uid_map').read().split()", vec![]);
    assert_eq!(
        value(&result),
        &code_runtime::json!(["1000", "1000", "1"]),
        "a nested user namespace"
    );
}

#[test]
fn nothing_one_run_leaves_in_the_interpreter_reaches_the_next() {
    // Module state, builtins, the environment, files, and randomness: each run is a fresh fork
    // of a zygote that never runs a program.
    let runtime = runtime(Limits::default());
    let plant = r#"
import builtins, json, os, random, sys
json.PLANTED = "secret"
builtins.PLANTED = "secret"
os.environ["PLANTED"] = "secret"
sys.modules["planted"] = json
open("/tmp/planted", "w").write("secret")
open("/dev/shm/planted", "w").write("secret")
return [random.random(), os.urandom(8).hex()]
"#;
    let look = r#"
import builtins, json, os, random, sys
return [hasattr(json, "PLANTED"), hasattr(builtins, "PLANTED"), "PLANTED" in os.environ,
        "planted" in sys.modules, os.path.exists("/tmp/planted"),
        os.path.exists("/dev/shm/planted"), random.random(), os.urandom(8).hex()]
"#;
    let planted = value(&run_on(&runtime, CodeRunRequest::new(plant))).clone();
    let seen = value(&run_on(&runtime, CodeRunRequest::new(look))).clone();
    for index in 0..6 {
        assert_eq!(seen[index], json!(false), "{seen}");
    }
    assert_ne!(seen[6], planted[0], "random is reseeded in each fork");
    assert_ne!(seen[7], planted[1]);
}

#[test]
fn a_run_holds_only_its_own_descriptors_and_sees_no_other_process() {
    let program = r#"
import os, signal
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
pids = sorted(int(pid) for pid in os.listdir("/proc") if pid.isdigit())
reached = []
for pid in range(1, 4096):
    if pid in (os.getpid(), 1):
        continue
    try:
        os.kill(pid, 0)
        reached.append(pid)
    except OSError:
        pass
shared = [line for line in open("/proc/self/maps")
          if line.split()[1][1] == "w" and line.split()[1][3] == "s"]
return [fds, pids, reached, open("/proc/1/cmdline", "rb").read().decode(),
        open("/proc/self/environ", "rb").read().decode(), shared]
"#;
    let seen = value(&run(program, vec![])).clone();
    // The four descriptors, and the one `listdir` holds.
    assert_eq!(seen[0], json!([0, 1, 2, 3, 4]), "{seen}");
    assert_eq!(seen[1], json!([1, 2]), "{seen}");
    assert_eq!(seen[2], json!([]), "{seen}");
    assert_eq!(seen[3], json!("cell\u{0}"), "{seen}");
    assert!(!seen[4].as_str().unwrap().contains("work-"), "the zygote's environment: {seen}");
    // No memory the fork shares with the zygote or another fork can be written.
    assert_eq!(seen[5], json!([]), "{seen}");
}

#[test]
fn exhausting_processes_or_memory_right_after_the_fork_leaves_the_zygote_whole() {
    // Memory enough for the process limit to be reached first (each fork's copy-on-write pages
    // count), and the hog then meets the budget.
    let runtime = runtime(Limits { max_memory_mb: 512, ..Limits::default() });
    let pid = runtime.zygote_pid().expect("a zygote");
    let storm = r#"
import os, time
started = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
        started += 1
except OSError as error:
    return [started > 0, error.errno]
"#;
    let seen = value(&run_on(&runtime, CodeRunRequest::new(storm))).clone();
    assert_eq!(seen, json!([true, libc::EAGAIN]), "the process limit holds");
    let hog = "chunks = []\ntry:\n    while True:\n        chunks.append(bytearray(1 << 20))\nexcept MemoryError:\n    return len(chunks) > 0";
    let result = run_on(&runtime, CodeRunRequest::new(hog));
    assert!(
        result.value() == Some(&json!(true)) || result.error().is_some(),
        "{}",
        result.to_json()
    );
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
    assert_eq!(runtime.zygote_pid(), Some(pid), "the same zygote serves on");
}

#[test]
fn a_fork_has_at_least_the_address_space_a_cell_from_scratch_has() {
    // A fork's address-space limit is the budget plus what the zygote maps beyond a bare
    // interpreter. Measured against an interpreter that had already compiled the zygote's own
    // source, it left a program under 16 MB 1.3 MB less room than a cell from scratch: a 1 MB
    // allocation failed as the unprivileged user.
    let room = "import resource\nsize = next(int(line.split()[1]) * 1024 for line in open('/proc/self/status') if line.startswith('VmSize:'))\nreturn resource.getrlimit(resource.RLIMIT_AS)[0] - size";
    let limits = Limits { max_memory_mb: 16, ..Limits::default() };
    let forked = runtime(limits);
    assert!(forked.zygote_pid().is_some(), "a zygote");
    let scratch =
        PythonCodeRuntime::new(PythonConfig { limits, zygote: false, ..PythonConfig::default() })
            .expect("python3 is installed");
    assert_eq!(scratch.zygote_pid(), None);
    let forked_room = value(&run_on(&forked, CodeRunRequest::new(room))).as_i64().unwrap();
    let scratch_room = value(&run_on(&scratch, CodeRunRequest::new(room))).as_i64().unwrap();
    assert!(
        forked_room >= scratch_room,
        "a fork's room {forked_room}, from scratch {scratch_room}"
    );
    let chunk = "chunk = bytearray(1 << 20)\nreturn len(chunk)";
    assert_eq!(value(&run_on(&forked, CodeRunRequest::new(chunk))), &json!(1 << 20));
}

#[test]
fn a_zygote_that_dies_is_started_again() {
    let runtime = runtime(Limits::default());
    let pid = runtime.zygote_pid().expect("a zygote");
    // SAFETY: kill on the pid of the zygote's cell, a child of this process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    // Runs go on: a fork that finds the zygote gone falls back to a cell from scratch, and a new
    // zygote serves the runs after. The cells forked ahead before the kill die with the zygote;
    // a run that took one as the kernel ended it ends as `worker-exit`, as any run whose cell
    // is killed from outside.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while runtime.zygote_pid() == Some(pid) && std::time::Instant::now() < deadline {
        let result = run_on(&runtime, CodeRunRequest::new("return 1"));
        let killed = failure(&result).is_some_and(|(kind, _)| kind == "worker-exit");
        assert!(result.value() == Some(&json!(1)) || killed, "{}", result.to_json());
    }
    let again = runtime.zygote_pid().expect("a zygote again");
    assert_ne!(again, pid);
    assert!(runtime.containment().zygote);
    // The cells made ahead while there was none come from scratch; then forks of the new one.
    let forked = (0..10).any(|_| {
        let program = "return open('/proc/self/uid_map').read().split()";
        let result = run_on(&runtime, CodeRunRequest::new(program));
        value(&result) == &json!(["1000", "1000", "1"])
    });
    assert!(forked, "no run forked from the new zygote");
}

#[test]
fn runs_side_by_side_have_networks_of_their_own_and_a_later_run_finds_nothing_left() {
    // A run that listens on an abstract Unix socket and holds it while another run looks for it;
    // then a run after both. Abstract names are per network namespace: neither may see it.
    let runtime = std::sync::Arc::new(runtime(Limits::default()));
    let (bound, release) = (
        std::sync::Arc::new(tokio::sync::Notify::new()),
        std::sync::Arc::new(tokio::sync::Notify::new()),
    );
    let hold = {
        let (bound, release) = (bound.clone(), release.clone());
        binding(move |_| {
            let (bound, release) = (bound.clone(), release.clone());
            async move {
                bound.notify_one();
                release.notified().await;
                Ok(json!(null))
            }
        })
    };
    let listen = r#"
import os, socket
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind("\0code-runtime-left")
listener.listen()
await tools.hold()
return os.readlink("/proc/self/ns/net")
"#;
    let look = r#"
import os, socket
listed = "@code-runtime-left" in open("/proc/self/net/unix").read()
probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    probe.connect("\0code-runtime-left")
    reached = True
except OSError:
    reached = False
probe.close()
mine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
mine.bind("\0code-runtime-left")
return [os.readlink("/proc/self/ns/net"), listed, reached]
"#;
    let listening = {
        let runtime = runtime.clone();
        let request = CodeRunRequest::new(listen).binding(tools().function("hold", hold));
        tokio().spawn(async move { runtime.run(request).await })
    };
    tokio().block_on(bound.notified());
    let beside = value(&run_on(&runtime, CodeRunRequest::new(look))).clone();
    release.notify_one();
    let listener = tokio().block_on(listening).expect("joined").expect("not contract misuse");
    let listener = value(&listener).clone();
    assert_ne!(beside[0], listener, "a network namespace of its own: {beside}");
    // Not listed, not reached; and its own socket of that name binds.
    assert_eq!((&beside[1], &beside[2]), (&json!(false), &json!(false)), "{beside}");
    let after = value(&run_on(&runtime, CodeRunRequest::new(look))).clone();
    assert_eq!((&after[1], &after[2]), (&json!(false), &json!(false)), "{after}");
}

#[test]
fn the_runs_init_is_closed_to_its_program_and_holds_none_of_the_zygote() {
    // PID 1 of a run starts as a clone of the zygote, whose memory, maps, environment and
    // descriptors no process of the run may read; on x86-64 it then executes the host's tiny
    // init (code-runtime-sandbox's run_init.rs), which is as closed and holds a page or two.
    let program = r#"
refused = []
for name in ("mem", "maps", "environ", "fd", "stack", "auxv"):
    try:
        path = "/proc/1/" + name
        (__import__("os").listdir(path) if name == "fd" else open(path, "rb").read(64))
    except PermissionError:
        refused.append(name)
resident_kb = int(open("/proc/1/statm").read().split()[1]) * 4
return [refused, open("/proc/1/comm").read().strip(), resident_kb]
"#;
    let answer = value(&run(program, vec![])).clone();
    assert_eq!(answer[0], json!(["mem", "maps", "environ", "fd", "stack", "auxv"]), "{answer}");
    assert_eq!(answer[1], json!("cell"), "{answer}");
    if cfg!(target_arch = "x86_64") {
        // The interpreter's clone is megabytes resident; the init, a few pages.
        assert!(answer[2].as_u64().is_some_and(|kb| kb < 256), "{answer}");
    }
}

#[test]
fn the_standard_modules_are_in_every_run_and_as_fresh_as_a_first_import() {
    let runtime = default_runtime();
    assert!(runtime.containment().zygote);
    let modules = json::encode(&json!(code_runtime_python::STANDARD_PRELOAD));
    let loaded = format!("import sys\nreturn [m for m in {modules} if m not in sys.modules]");
    assert_eq!(value(&run(&loaded, vec![])), &json!([]), "every standard module is preloaded");
    // What a run does to them, and what they hold that each run must have its own of.
    let plant = r#"
import asyncio, dataclasses, decimal, json, random, re, statistics, uuid
json.dumps = lambda *args, **kwargs: "planted"
asyncio.PLANTED = dataclasses.PLANTED = statistics.PLANTED = True
re.purge()
decimal.getcontext().prec = 3
random.seed(1)
return [uuid.uuid4().hex, random.random(), str(decimal.Decimal(1) / 7)]
"#;
    let look = r#"
import asyncio, dataclasses, decimal, json, random, statistics, uuid
return [json.dumps([1]), hasattr(asyncio, "PLANTED") or hasattr(dataclasses, "PLANTED")
        or hasattr(statistics, "PLANTED"), str(decimal.Decimal(1) / 7), uuid.uuid4().hex,
        random.random()]
"#;
    let planted = value(&run_on(runtime, CodeRunRequest::new(plant))).clone();
    assert_eq!(planted[2], json!("0.143"), "{planted}");
    let first = value(&run_on(runtime, CodeRunRequest::new(look))).clone();
    let second = value(&run_on(runtime, CodeRunRequest::new(look))).clone();
    assert_eq!(first[0], json!("[1]"), "{first}");
    assert_eq!(first[1], json!(false), "{first}");
    assert_eq!(first[2], json!("0.1428571428571428571428571429"), "{first}");
    assert_ne!(first[3], planted[0], "uuid4 draws afresh in each run");
    assert_ne!(first[3], second[3], "uuid4 draws afresh in each run");
    assert_ne!(first[4], planted[1], "the seed a run set stayed");
    assert_ne!(first[4], second[4], "random is reseeded in each fork");
    // The loop `run_code`'s description recommends, as a program writes it.
    let gather = "import asyncio\n\
        async def twice(i):\n    await asyncio.sleep(0)\n    return 2 * i\n\
        return sum(await asyncio.gather(*(twice(i) for i in range(10))))";
    assert_eq!(value(&run(gather, vec![])), &json!(90));
    // The loop the zygote made and ran once (what a first loop costs, shared by every fork) left
    // nothing a run's loop sees: only the run's own task, and the loop current while it runs.
    let tasks = "import asyncio\n\
        return [len(asyncio.all_tasks()), asyncio.get_event_loop() is asyncio.get_running_loop()]";
    assert_eq!(value(&run(tasks, vec![])), &json!([1, true]));
}

#[test]
fn threads_logging_and_a_programs_own_forks_work_in_a_fork_of_the_zygote() {
    // The zygote holds back `threading`'s and `logging`'s after-fork hooks from its own forks
    // (they mend what other threads held, and it has none): the program's process registers
    // them, so a program that starts threads and forks finds both as a fresh interpreter would.
    let program = r#"
import io, logging, os, threading
stream = io.StringIO()
logging.basicConfig(stream=stream, level=logging.INFO, force=True)
logging.info("before")
release = threading.Event()
waiter = threading.Thread(target=release.wait)
waiter.start()
main = threading.main_thread()
seen = [threading.current_thread() is main, main.native_id == threading.get_native_id(),
        len(threading.enumerate())]
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    # One thread in the child, the waiter gone; logging's lock free to take.
    alone = len(threading.enumerate()) == 1 and threading.current_thread() is threading.main_thread()
    logging.info("child")
    os.write(write, b"alone" if alone else b"not alone")
    os._exit(0)
os.close(write)
_, status = os.waitpid(pid, 0)
release.set()
waiter.join()
logging.info("after")
return seen + [os.read(read, 16).decode(), status, stream.getvalue().split()]
"#;
    let result = run(program, vec![]);
    assert_eq!(
        value(&result),
        &json!([true, true, 2, "alone", 0, ["INFO:root:before", "INFO:root:after"]]),
        "{result:?}"
    );
}

#[test]
fn the_standard_modules_are_preloaded_only_by_a_zygote_and_only_when_asked() {
    // Named in pieces: a program that names `asyncio` or `json` is given them (bootstrap.py).
    let loaded = "import sys\nreturn ['async' + 'io' in sys.modules, 'js' + 'on' in sys.modules]";
    for (zygote, standard_preload, expected) in
        [(true, false, json!([false, false])), (false, true, json!([false, false]))]
    {
        let config = PythonConfig { zygote, standard_preload, ..PythonConfig::default() };
        let runtime = PythonCodeRuntime::new(config).unwrap();
        assert_eq!(runtime.containment().zygote, zygote);
        assert_eq!(value(&run_on(&runtime, CodeRunRequest::new(loaded))), &expected);
        tokio().block_on(runtime.dispose());
    }
}

# The zygote: a fork server in a sandbox cell of its own, whose forks become the cells of runs.
#
# It is a cell server of code-runtime-sandbox's (code-runtime-sandbox/src/cell_server.rs) on fd 3,
# a SOCK_SEQPACKET socket: first the bootstrap's prelude (which it loads, without running a
# program) and the hello, whose plan is the recipe (the layers every child applies, as the host
# computed them), answered with `ready` and the host's build (a zygote is always the host's own
# build: the host wrote every file it runs); then one message per run: the run's settings as
# JSON, with its stdin, stdout, stderr, channel and report socket. No frame of any program ever reaches this process, and nothing a run
# does comes back: each run is a fork of it that enters namespaces of its own.
#
#   zygote ──clone──▶ B: PID 1 of the run, in new user, mount, pid, ipc, uts and net namespaces
#                     (its parent the zygote cell's init): forks C at once; makes /tmp, /dev/shm,
#                     /proc and the work directory, sets C's rlimits; tells the host C is ready;
#                     then executes the host's init image, which reaps and reports the exit
#                     └──fork──▶ C: the program's process: its uid map; no capabilities, Landlock,
#                                seccomp, then the bootstrap's main
#
# B and C take turns with a byte on a pipe each way (see `_init`). B sends the host `ready` with
# pidfds of B and of C once C has applied every layer, or C, B or the zygote sends `failed <step>:
# <errno>`; B's image sends `exit <status>` when C ends. Numbers of the kernel's ABI (system
# calls, flags) come from the host, which has them from its C library.
#
# Memory: a fork shares every page with the zygote until one of them writes it, and Python
# writes wherever it runs (each object it touches has a reference count). C keeps its copies for
# as long as the run waits; B's go with its `exec`. So C does only what must be done in its own
# process, B the rest, the zygote makes and warms once what every fork would otherwise make, and
# its loop between forks is short.
import _signal
import _socket
import gc
import marshal
import posix
import sys


def _address_space():
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


# The interpreter as it started, measured before this file was compiled (`_BARE`, by the start
# in code-runtime-python's command.rs): all the fork server adds to it (the bootstrap, the
# preloaded modules, ctypes and its library, this file and its compilation, the buffers its
# messages took) is granted on top of a run's address-space limit (see `_OVERHEAD`), so a
# program has at least the room it would have in a cell started from scratch.
_bare = _BARE  # noqa: F821

_control = _socket.socket(fileno=3)
_prelude = _control.recv(1 << 23)
_end = 10 + int(_prelude[:10])
_scope = {"__name__": "__main__", "_FD": 3, "_PRELUDE": b"", "_ZYGOTE": True}
exec(marshal.loads(_prelude[10:_end]), _scope)
del _prelude, _end
_recipe, _rights, _flags, _address = _control.recvmsg(1 << 20, _socket.CMSG_SPACE(4))
_hello = _scope["_loads"](_recipe)
_recipe = _hello["plan"]
# The answer, made now: a zygote is of its host's build (the host wrote every file it runs), so
# it says the host's. Made and freed before the warm-up, so that no block it held is freed among
# the pages the forks share.
_READY = ('{"ready": {"build": %s, "containment": null}}' % _scope["_quote"](_hello["build"])).encode()
del _hello
# The run's init as an executable (code-runtime-sandbox's run_init.rs), where the host has one.
_RUN_INIT = next(
    (
        int.from_bytes(data[:4], sys.byteorder)
        for level, kind, data in _rights
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS and len(data) >= 4
    ),
    None,
)
del _rights, _flags, _address
_SYS = _recipe["syscalls"]
_FLAGS = _recipe["flags"]
_SECCOMP = [bytes.fromhex(program) for program in _recipe["seccomp"]]
# The host's preloaded modules (`_PRELOAD`, set ahead of this file): imported once here, so every
# fork has them in memory; what they map is granted on top of a run's limit, as ctypes is. The
# standard ones (`_STANDARD`) where the interpreter has them: a build without one serves without.
# The after-fork hooks of `threading` and `logging` mend the locks and thread lists that other
# threads held as the process forked. A zygote has one thread, so in its forks they mend nothing,
# but running them costs each run half a megabyte: Python writes to every object it touches (a
# reference count), and each page written is a fork's own copy. They are held back here and
# registered in each program's process once it is forked, for the forks a program makes itself.
# Every other module's hooks (`random` reseeds) run in each program's process as they would.
import os  # noqa: E402

_withheld = []
_register_at_fork = posix.register_at_fork


def _registering(**hooks):
    if getattr(hooks.get("after_in_child"), "__module__", None) in ("threading", "logging"):
        _withheld.append(hooks)
    else:
        _register_at_fork(**hooks)


os.register_at_fork = posix.register_at_fork = _registering
for _name in globals().get("_STANDARD", ()):
    try:
        __import__(_name)
    except Exception:
        pass
for _name in globals().get("_PRELOAD", ()):
    __import__(_name)
os.register_at_fork = posix.register_at_fork = _register_at_fork
try:
    _threads = len(posix.listdir("/proc/self/task"))
except OSError:
    _threads = 1  # No /proc of its own to look in: nothing to go by.
if _threads > 1:
    # A fork keeps only the thread that forked: a module's threads would be missing in every
    # run, with whatever locks they held. Cells then start from scratch.
    sys.stderr.write("the preloaded modules started threads: a zygote cannot fork safely\n")
    posix._exit(78)
import ctypes  # noqa: E402

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
# Declared, so that each call converts its arguments in C: the capability drop alone makes 66.
_libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
_CELL = ctypes.create_string_buffer(b"cell")


class _Failed(Exception):
    pass


def _check(step, result):
    if result < 0:
        raise _Failed("%s: %d" % (step, ctypes.get_errno()))
    return result


def _call(step, number, *args):
    return _check(step, _libc.syscall(ctypes.c_long(number), *args))


def _write_file(step, path, text):
    try:
        fd = posix.open(path, posix.O_WRONLY | posix.O_CLOEXEC)
        try:
            posix.write(fd, text.encode())
        finally:
            posix.close(fd)
    except OSError as error:
        raise _Failed("%s: %d" % (step, error.errno))


def _mount(step, source, target, kind, flags, options):
    data = options.encode() if options is not None else None
    _check(step, _libc.mount(source, target, kind, ctypes.c_ulong(flags), data))


def _prctl(step, *args):
    _check(step, _libc.prctl(*args))


def _fail(report, error):
    text = str(error) if isinstance(error, _Failed) else "%s: %s" % (type(error).__name__, error)
    try:
        posix.write(report, b"failed " + text.encode())
    except OSError:
        pass


def _map_ids():
    # The program's process's, which makes itself dumpable for it: its uid map (the zygote's uid
    # as the cell user), whose `/proc` file an undumpable process cannot open as an unprivileged
    # host's uid. Its init then has a user to make files as.
    uid = _recipe["uid"]
    _write_file("denying setgroups", b"/proc/self/setgroups", "deny")
    _write_file("writing the uid map", b"/proc/self/uid_map", "%d %d 1" % (uid, uid))
    _write_file("writing the gid map", b"/proc/self/gid_map", "%d %d 1" % (uid, uid))


def _make_cell(run, worker):
    # The init's: /tmp, /dev/shm, /proc and the work directory, which the namespaces it shares
    # with the program's process hold for both, and the program's process's resource limits
    # (`prlimit`), with the capabilities the new user namespace gave it.
    nosuid_nodev = _FLAGS["nosuid"] | _FLAGS["nodev"]
    _mount("mounting /tmp", b"tmpfs", b"/tmp", b"tmpfs", nosuid_nodev, run["tmp"])
    posix.mkdir("/tmp/.shm", 0o1777)
    posix.chmod("/tmp/.shm", 0o1777)
    _mount("binding /dev/shm", b"/tmp/.shm", b"/dev/shm", None, _FLAGS["bind"], None)
    if _recipe["proc"] is not None:
        # Of the run's pid namespace, which the init is PID 1 of.
        flags = nosuid_nodev | _FLAGS["noexec"]
        _mount("mounting /proc", b"proc", b"/proc", b"proc", flags, _recipe["proc"])
    posix.mkdir(run["work"], 0o700)
    for resource, soft, hard in run["rlimits"]:
        if resource == _FLAGS["rlimit_as"]:
            soft, hard = soft + _OVERHEAD, hard + _OVERHEAD
        limit = _Rlimit(soft, hard)
        _check(
            "setting resource limits",
            _libc.prlimit(worker, ctypes.c_int(resource), ctypes.byref(limit), None),
        )


def _init(report, fds, run):
    # B: PID 1 of the run, undumpable, named `cell`, SIGINT at its default, as the zygote made
    # itself before it served (see its start, below). It forks at once: the interpreter's own
    # fork, so the program's process runs the modules' after-fork hooks (`random` reseeds),
    # which the init's clone skipped. Then the two take turns, a byte on a pipe each way: the
    # program's process maps its ids (`m`), the init makes the cell (`c`), the program's process
    # applies its layers (`r`), the init tells the host. What the init writes is gone with the
    # `exec` that follows (see `_become_init`); what the program's process writes it keeps, for
    # as long as the run waits: each step is the init's that can be.
    init_reads, program_writes = posix.pipe()
    program_reads, init_writes = posix.pipe()
    worker = posix.fork()
    if worker == 0:
        posix.close(init_reads)
        posix.close(init_writes)
        for hooks in _withheld:
            _register_at_fork(**hooks)
        try:
            _become_program(report, fds, run, program_writes, program_reads)
        except BaseException as error:
            _fail(report, error)
        posix._exit(127)
    posix.close(program_writes)
    posix.close(program_reads)
    for fd in fds[:4]:
        posix.close(fd)
    # Nothing more, should the program's process fail (it has reported why) or die first; nor
    # should the cell not be made, which the program's process then learns from the pipe's end.
    if posix.read(init_reads, 1) == b"m":
        try:
            _make_cell(run, worker)
        except BaseException as error:
            _fail(report, error)
        else:
            posix.write(init_writes, b"c")
            if posix.read(init_reads, 1) == b"r":
                _report_ready(report, worker)
    posix.close(init_writes)
    if _RUN_INIT is not None and worker == 2:
        _become_init(report)
    _supervise(report, worker)


def _report_ready(report, worker):
    # Every layer holds in the program's process: the host may start the run, with pidfds of this
    # init and of the program's process. Sent from here, where the socket and message this takes
    # are gone with the `exec` that follows, rather than by the program's process, which would
    # keep its copy of every page they write (some 100 kB).
    pidfds = [posix.pidfd_open(posix.getpid()), posix.pidfd_open(worker)]
    reporting = _socket.socket(fileno=report)
    try:
        rights = b"".join(fd.to_bytes(4, sys.byteorder) for fd in pidfds)
        reporting.sendmsg([b"ready"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
    except OSError:
        pass  # The host is gone: the init reports to no one.
    finally:
        reporting.detach()
        for fd in pidfds:
            posix.close(fd)


def _become_init(report):
    # B, having forked the program's process (PID 2, which the init waits for): the host's init
    # in place of this interpreter, whose pages B would otherwise hold its own copy of wherever
    # it or the zygote writes them (390 kB per waiting run). Its report socket is its descriptor
    # 3; the rest close as it executes. Without a capability first: the image may be executed
    # but not read, so the exec makes the init undumpable (the kernel's rule for an executable
    # its process cannot read) before its first instruction, as B was. Should any step fail, B
    # stays what it was and supervises in Python.
    try:
        posix.dup2(report, 3)
        _close_on_exec_from(4)
        _call("dropping capabilities", _SYS["capset"], _CAP_HEADER, _CAP_NONE)
        posix.execve(_RUN_INIT, [b"cell"], {})
    except BaseException:
        pass


def _supervise(report, worker):
    # Nothing else: each line the init runs writes pages it shares with the zygote and the
    # program's process, which then hold copies of their own.
    status = 0
    while True:
        try:
            pid, status = posix.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == worker:
            break
    code = posix.waitstatus_to_exitcode(status)
    code = 128 - code if code < 0 else code
    try:
        posix.write(report, b"exit %d" % code)
    except OSError:
        pass
    posix._exit(code)


# capset(2)'s arguments for "none": _LINUX_CAPABILITY_VERSION_3, this process; three empty sets.
_CAP_HEADER = (ctypes.c_uint32 * 2)(0x20080522, 0)
_CAP_NONE = (ctypes.c_uint32 * 6)()


def _drop_capabilities():
    # A new user namespace gives its creator every capability and a full bounding set: all go.
    prctl, drop = _libc.prctl, _FLAGS["capbset_drop"]
    for capability in range(64):
        prctl(drop, capability, 0, 0, 0)
    prctl(_FLAGS["cap_ambient"], _FLAGS["cap_ambient_clear_all"], 0, 0, 0)
    _call("dropping capabilities", _SYS["capset"], _CAP_HEADER, _CAP_NONE)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("access", ctypes.c_uint64), ("fd", ctypes.c_int32)]


def _landlock(landlock):
    attr = _RulesetAttr(landlock["fs"], landlock["net"], landlock["scoped"])
    ruleset = _call(
        "enforcing landlock", _SYS["landlock_create_ruleset"], ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0),
    )
    try:
        for path, access in landlock["rules"]:
            try:
                fd = posix.open(path, _FLAGS["o_path"] | posix.O_CLOEXEC)
            except FileNotFoundError:
                continue  # A path that does not exist in this cell grants nothing.
            try:
                rule = _PathBeneath(access, fd)
                _call(
                    "enforcing landlock", _SYS["landlock_add_rule"], ctypes.c_long(ruleset),
                    ctypes.c_long(1), ctypes.byref(rule), ctypes.c_uint32(0),
                )
            finally:
                posix.close(fd)
        _call(
            "enforcing landlock", _SYS["landlock_restrict_self"], ctypes.c_long(ruleset),
            ctypes.c_uint32(0),
        )
    finally:
        posix.close(ruleset)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _filter(program):
    # Built once, in the zygote: every fork installs the same programs.
    buffer = ctypes.create_string_buffer(program, len(program))
    return buffer, _Fprog(len(program) // 8, ctypes.addressof(buffer))


_FILTERS = [_filter(program) for program in _SECCOMP]


def _seccomp(fprog):
    _call(
        "installing the seccomp filter", _SYS["seccomp"],
        ctypes.c_long(_FLAGS["seccomp_set_mode_filter"]), ctypes.c_long(0), ctypes.byref(fprog),
    )


class _Rlimit(ctypes.Structure):
    _fields_ = [("soft", ctypes.c_uint64), ("hard", ctypes.c_uint64)]


def _close_from(first):
    # One close_range(2) for all of them: `posix.closerange` closes one descriptor a system call
    # before Python 3.10, a million calls that made each run of a 3.9 interpreter 70 ms slower.
    # The loop is for a kernel without close_range (before 5.9).
    everything = ctypes.c_uint(0xFFFFFFFF)
    if _libc.syscall(ctypes.c_long(_SYS["close_range"]), ctypes.c_uint(first), everything, 0):
        posix.closerange(first, 1 << 20)


def _close_on_exec_from(first):
    # close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11): what a failed exec leaves open stays.
    everything = ctypes.c_uint(0xFFFFFFFF)
    _libc.syscall(ctypes.c_long(_SYS["close_range"]), ctypes.c_uint(first), everything, 4)


def _become_program(report, fds, run, to_init, from_init):
    # C: the program's process. Dumpable again (the init's flag came with the fork; an exec
    # would have reset it), so its own `/proc` files are its own, to write its uid map to and
    # for the host to read its usage from.
    _prctl("making the program dumpable", _FLAGS["set_dumpable"], 1, 0, 0, 0)
    _map_ids()
    posix.write(to_init, b"m")
    posix.setsid()
    _prctl("setting the parent-death signal", _FLAGS["set_pdeathsig"], _FLAGS["sigkill"], 0, 0, 0)
    _drop_capabilities()
    _prctl("setting no_new_privs", _FLAGS["set_no_new_privs"], 1, 0, 0, 0)
    for target, fd in enumerate(fds[:4]):
        posix.dup2(fd, target)
    # The cell made (its /tmp and work directory, which Landlock's rules and the `chdir` need) and
    # this process's limits set; or the init failed, and said why.
    if posix.read(from_init, 1) != b"c":
        posix._exit(127)
    posix.chdir(run["work"])
    if _recipe["landlock"] is not None:
        _landlock(_recipe["landlock"])
    for _buffer, fprog in _FILTERS:
        _seccomp(fprog)
    # A preloaded numpy's global generator was seeded once, in the zygote: each run draws its
    # own numbers, as `random` does after a fork.
    _numpy_random = sys.modules.get("numpy.random")
    if _numpy_random is not None:
        _numpy_random.seed()
    # The zygote's environment was emptied at its start: HOME is the run's one variable, set in
    # the C library's environment and in the dict `os.environ` reads and writes (its `_data`),
    # without the mapping's methods to run.
    home = run["work"].encode()
    posix.putenv(b"HOME", home)
    posix.environ[b"HOME"] = home
    # Every layer holds: its init tells the host (see `_report_ready`).
    posix.write(to_init, b"r")
    # The pipe, the report socket, the control socket and the rest: nothing but 0 to 3 stays.
    _close_from(4)
    _control.detach()
    _scope["_main"]()


# Called with the GIL held (a `PyDLL`).
_clone = ctypes.PyDLL(None, use_errno=True).syscall
_clone.restype = ctypes.c_long


def _fork_init():
    # One clone makes the run's init: new namespaces (it is PID 1 of its own), and the zygote's
    # parent (the zygote cell's init) as its parent, which reaps it: the zygote waits for no one.
    # Without the interpreter's fork protocol (`PyOS_BeforeFork` and the modules' hooks): the
    # zygote has one thread (checked as it starts), so no lock is held by another, and the init
    # runs no module's code; its own fork of the program's process runs the protocol in full.
    # Its hooks cost pages each fork holds a copy of (a preloaded `threading`'s, 400 KB).
    pid = _clone(ctypes.c_long(_SYS["clone"]), ctypes.c_long(_FLAGS["clone"]), 0, 0, 0, 0)
    if pid < 0:
        raise _Failed("entering the run's namespaces: %d" % ctypes.get_errno())
    return pid


def _serve(request, fds):
    run = _scope["_loads"](request)
    if _fork_init() == 0:
        report = fds[4]
        try:
            posix.close(3)
            _init(report, fds, run)
        except BaseException as error:
            _fail(report, error)
        posix._exit(125)


def _disguise():
    # What `/proc/<pid>/cmdline` and `environ` read of the zygote and its forks (the fork
    # server's source, its environment) is overwritten: they read as `cell`, as a cell's init
    # does. The interpreter copied both at its start and reads neither again.
    with open("/proc/self/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    # Fields 48 to 51 of stat(5): the third field is the first after the command name.
    args_start, args_end, env_start, env_end = (int(fields[n - 3]) for n in range(48, 52))
    ctypes.memset(env_start, 0, env_end - env_start)
    ctypes.memset(args_start, 0, args_end - args_start)
    if args_end - args_start > 5:
        ctypes.memmove(args_start, b"cell\0", 5)
        ctypes.memset(args_end - 1, ord(" "), 1)


_disguise()
# The zygote's environment (its own work directory as HOME) is nothing of a run's: each fork
# sets its own HOME only.
os.environ.clear()
posix.environ.clear()
# What every run's init must be, made once here, where its clone inherits it: undumpable (its
# memory is the run's control: no process of the run may read it; the program's process makes
# itself dumpable again), named `cell`, and with SIGINT at its default (the interpreter's handler
# would make SIGINT one a program could send its init, where Landlock's signal scope does not
# stop it first; as PID 1 with the default, the init ignores it).
_prctl("making the zygote undumpable", _FLAGS["set_dumpable"], 0, 0, 0, 0)
_libc.prctl(_FLAGS["set_name"], ctypes.addressof(_CELL), 0, 0, 0)
_signal.signal(_signal.SIGINT, _signal.SIG_DFL)


def _warm_up():
    # A run's program parsed to a tree and compiled, once here on a sample, and dropped: what the
    # first time costs beyond the next (the parser's and compiler's first use, their caches), the
    # zygote pays once and every fork shares.
    program = (
        "import json\nfrom tools import wait\nrows = [n * 2 for n in range(3)]\n"
        "async def main():\n    return await wait({'rows': rows, 'text': f'{rows!r}'})\n"
    )
    tree = compile(program, "<program>", "exec", _scope["_ast"].PyCF_ONLY_AST)
    compile(tree, "<program>", "exec")
    # A program that mentions asyncio runs on an event loop the bootstrap makes (`_loop_run`):
    # one made and run here to its close makes the event loop policy and what the first loop
    # costs beyond the next, once, for every fork to share. Measured in forks of an interpreter
    # holding the standard modules: a loop made with 169 page copies rather than 247 (0.9 ms
    # rather than 1.35) and run with 52 rather than 65; a fork that makes no loop copies 3 to 5
    # pages more. The policy's per-thread state is made anew after, so a run's is that of a
    # first import.
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:

        async def sample():
            await asyncio.sleep(0)

        _scope["_loop_run"](asyncio, asyncio.new_event_loop(), sample())
        policy = asyncio.get_event_loop_policy()
        if hasattr(policy, "_local"):
            policy._local = type(policy._local)()


def _small_blocks_free():
    # {block size: blocks free in the pools of that size}, as the interpreter's small-object
    # allocator (pymalloc) reports it on the C level's stderr: {} from an interpreter without it
    # or with a report of another form.
    report = b""
    stats = getattr(sys, "_debugmallocstats", None)
    if stats is None:
        return {}
    read, write = posix.pipe()
    # A report longer than the pipe holds is cut short rather than left blocking the zygote.
    posix.set_blocking(write, False)
    saved = posix.dup(2)
    posix.dup2(write, 2)
    posix.close(write)
    try:
        stats()
    finally:
        posix.dup2(saved, 2)
        posix.close(saved)
        posix.set_blocking(read, False)
        try:
            while True:
                chunk = posix.read(read, 1 << 16)
                if not chunk:
                    break
                report += chunk
        except BlockingIOError:
            pass
        posix.close(read)
    free = {}
    for line in report.split(b"\n"):
        # "class size pools blocks-in-use blocks-free", all numbers.
        fields = line.split()
        if len(fields) == 5 and all(field.isdigit() for field in fields):
            free[int(fields[1])] = int(fields[4])
    return free


def _fill_small_blocks():
    # A fork's small objects come from the zygote's pools (runs of one block size, 16 KiB each in
    # CPython 3.11), whose free blocks lie wherever the zygote freed objects: each object a run
    # makes then writes a page of its own, and each page written is the run's own copy. Every
    # free block is taken here, and kept for the zygote's life, so that a fork's first objects of
    # each size come in order from one new pool: a page for dozens of them. Measured (a run
    # waiting on a call, pages of its processes not the zygote's): 2.12 MB before, 1.95 MB after.
    # It costs the zygote the free blocks' bytes once (some 450 kB).
    kept = []
    for size, free in _small_blocks_free().items():
        # Objects of exactly `size` bytes: a bare object is 16; a float 24, which the 32-byte
        # class holds (floats come from a free list of up to 100 first); bytes 33 plus their length.
        if size == 16:
            kept.extend(object() for _ in range(free + 1))
        elif size == 32:
            kept.extend(float(n) for n in range(free + 101))
        elif size >= 48:
            kept.extend(bytes(size - 33) for _ in range(free + 1))
    return kept


def _warm_calls():
    # What of ctypes only a fork would use: made once here, where every fork shares it, rather
    # than in each. Landlock's version is asked (LANDLOCK_CREATE_RULESET_VERSION: no ruleset is
    # made), with the argument types its rules take.
    _RulesetAttr(0, 0, 0)
    _PathBeneath(0, -1)
    _libc.syscall(
        ctypes.c_long(_SYS["landlock_create_ruleset"]), None, ctypes.c_size_t(0), ctypes.c_uint32(1)
    )


def _thread_id():
    # Each run's program process is PID 2 of its pid namespace (its init's first fork): the
    # kernel's id of its one thread, which `threading`'s after-fork hook would record in each
    # fork (a hundred kB of pages each would keep its copy of), recorded once here. The thread's
    # own id, `pthread_self`, is the zygote's thread's in every fork, as it is here.
    threading = sys.modules.get("threading")
    main = threading.main_thread() if threading is not None else None
    if main is not None and hasattr(main, "_native_id"):
        main._native_id = 2


# Everything loaded so far lives as long as the zygote: out of the collector's sight, so that a
# collection in a fork (or here) does not write to every object, which would copy each page.
_warm_up()
_warm_calls()
_thread_id()
gc.collect()
_filled = _fill_small_blocks()
# Measured last: all the zygote maps beyond the bare interpreter (the preloaded modules, ctypes,
# this file's machinery, the warm-up's and the kept blocks' arenas) is granted on top of a run's
# address-space limit.
_OVERHEAD = max(0, _address_space() - _bare)
gc.freeze()
_control.send(_READY)
while True:
    try:
        _request, _rights, _flags, _address = _control.recvmsg(1 << 16, _socket.CMSG_SPACE(5 * 4))
    except InterruptedError:
        continue
    _fds = [
        int.from_bytes(data[i : i + 4], sys.byteorder)
        for level, kind, data in _rights
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
        for i in range(0, len(data) - len(data) % 4, 4)
    ]
    if not _request:
        posix._exit(0)  # The host is gone.
    try:
        if len(_fds) == 5:
            _serve(_request, _fds)
        elif _fds:
            _fail(_fds[-1], _Failed("a request without its five descriptors"))
    except BaseException as error:
        if len(_fds) == 5:
            _fail(_fds[4], error)
    finally:
        for _fd in _fds:
            posix.close(_fd)

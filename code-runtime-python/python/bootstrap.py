# The code-runtime child bootstrap (docs/python-frame-protocol.md), run as `python3 -I -S -B -c`.
#
# It reads `boot` from fd 3, answers `boot-ack`, reads `run`, runs the program as the body of an
# async function in a fresh globals dict, and sends `done`. Printed lines go out as `log` frames,
# binding calls as `call` frames answered by `reply` frames.
#
# Start-up cost matters (a run is one interpreter start), so only built-in modules are imported on
# the hot path: `posix`, `_json` (the C half of `json`, without the `re` import that `json` costs)
# and `_ast`. `asyncio` is imported only when the program mentions it, `traceback` only to render an
# exception. Works on CPython 3.9 and newer.

import sys
import posix
import builtins
import _ast
import _json

# The frame channel's descriptor, from the loader (crate constant `PROTOCOL_FD`). The wrapper's name
# and every message the program may see arrive in the `boot` frame, so the host owns them.
_FD = globals()["_FD"]
# The version of the fd-3 frames, which `boot` must carry (crate constant `frame::VERSION`).
_VERSION = 1
_WRAPPER = ""
_MESSAGES = {}
_PROGRAM = "<program>"

_write = posix.write
_read = posix.read
_exit = posix._exit
_quote = _json.encode_basestring

# What the loader read past the bytecode: the start of the first frame.
_inbox = bytearray(globals().get("_PRELUDE", b""))
_results = {}
_futures = {}
_loop = None
_next_id = 0
_max_output = 0
_max_frame = 0
_source = ""
# The program's clock in a reproducible run (milliseconds since the epoch), moved by each reply's
# `t` and by `_STEP_MS` at each reading; `None` leaves the clock the machine's.
_clock = None
_STEP_MS = 0.001
_real_monotonic = None
# A resumed run's recorded answers by call number (`replay.answers`), which the child gives the
# program itself, in their first order, without a round trip; the host checks each call.
_answers = None
_functions = []
_made = 0
_next_rank = 0
_ready = {}
# Recorded replies whose turn has come, not yet settled (under asyncio, one a turn).
_due = []
_settling = False


class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo = None

    @staticmethod
    def parse_constant(name):
        raise ValueError(name)


_scan = _json.make_scanner(_ScanContext())


def _loads(line):
    value, _end = _scan(line.decode("utf-8"), 0)
    return value


def _send(text):
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Only log and exception text reaches here with lone surrogates; show them escaped.
        data = text.encode("utf-8", "backslashreplace")
    if _held:
        _held.append(data + b"\n")
        data = b"".join(_held)[:-1]
        _held.clear()
        _held_bytes[0] = 0
    view = memoryview(data + b"\n")
    while view:
        written = _write(_FD, view)
        view = view[written:]


def _write_all(data):
    view = memoryview(data)
    while view:
        written = _write(_FD, view)
        view = view[written:]


def _session_blob_read(size):
    """The `size` bytes that follow the boot line raw (a session's values), as a bytearray."""
    global _session_blob
    blob = bytearray(_inbox[:size])
    del _inbox[:size]
    while len(blob) < size:
        chunk = _read(_FD, min(size - len(blob), 1 << 22))
        if not chunk:
            _exit(70)  # The host went away.
        blob += chunk
    _session_blob = blob


# Frames the host need not see at once (calls answered from the record), held to go with the
# next write: a write per replayed call would cost more than the call itself.
_held = []
_held_bytes = [0]


def _send_held(text):
    data = text.encode("utf-8") + b"\n"
    _held.append(data)
    _held_bytes[0] += len(data)
    if _held_bytes[0] >= 1 << 16:
        _flush()


def _flush():
    if _held:
        data = b"".join(_held)
        _held.clear()
        _held_bytes[0] = 0
        view = memoryview(data)
        while view:
            written = _write(_FD, view)
            view = view[written:]


def _recv(spin=0):
    _flush()
    # Where the search for the line's end resumes: a long frame (a session's state) arrives in
    # many reads, and each is searched once, not the whole inbox again.
    scanned = 0
    while True:
        end = _inbox.find(b"\n", scanned)
        if end >= 0:
            line = bytes(_inbox[:end])
            del _inbox[: end + 1]
            return line
        scanned = len(_inbox)
        chunk = _read_spinning(spin) if spin else _read(_FD, 1 << 16 if scanned < 1 << 20 else 1 << 22)
        if not chunk:
            _exit(70)  # The host went away.
        _inbox.extend(chunk)


def _read_spinning(attempts):
    # Waking a process that sleeps on another CPU costs tens of microseconds on a virtual machine,
    # more than a fast binding takes. Polling a few times first halves a round trip, for about the
    # CPU time that sleeping and waking cost anyway.
    set_blocking = posix.set_blocking
    set_blocking(_FD, False)
    try:
        for _ in range(attempts):
            try:
                return _read(_FD, 1 << 16)
            except BlockingIOError:
                pass
    finally:
        set_blocking(_FD, True)
    return _read(_FD, 1 << 16)


def _clip(text):
    # Any prefix whose JSON size is above the output budget makes the host report the same
    # `output-limit` as the whole text would, so nothing longer than that needs to cross.
    limit = _max_output + 1
    if len(text) <= limit:
        return text
    text = text[:limit]
    low, high = 1, limit
    while low < high:
        middle = (low + high) // 2
        if len(_quote(text[:middle]).encode("utf-8", "backslashreplace")) - 2 > _max_output:
            high = middle
        else:
            low = middle + 1
    return text[:low]


# --- Values -------------------------------------------------------------------------------------


class _Lossy(Exception):
    pass


_INF = float("inf")
_SAFE = 9007199254740992


def _encode(value):
    """Compact JSON of a lossless value and its UTF-8 size; raises `_Lossy` for anything else.
    Iterative, so any depth works."""
    t = type(value)
    if t is int and -_SAFE <= value <= _SAFE:
        text = int.__repr__(value)
        return text, len(text)
    out = []
    emit = out.append
    stack = [(0, value)]
    push = stack.append
    pop = stack.pop
    path = set()
    while stack:
        kind, item = pop()
        if kind == 1:
            emit(item)
            continue
        if kind == 2:
            path.discard(item)
            continue
        t = type(item)
        if item is None:
            emit("null")
        elif t is bool:
            emit("true" if item else "false")
        elif t is str:
            emit(_quote(item))
        elif t is int:
            if -_SAFE <= item <= _SAFE:
                emit(int.__repr__(item))
            else:
                try:
                    double = float(item)
                except OverflowError:
                    raise _Lossy() from None
                if int(double) != item:
                    raise _Lossy()
                emit(float.__repr__(double))
        elif t is float:
            if item != item or item == _INF or item == -_INF:
                raise _Lossy()
            if item == 0.0 and float.__repr__(item)[0] == "-":
                raise _Lossy()
            emit(float.__repr__(item))
        elif t is list or t is _FrozenList:
            key = id(item)
            if key in path:
                raise _Lossy()
            path.add(key)
            push((2, key))
            push((1, "]"))
            for index in range(len(item) - 1, -1, -1):
                push((0, item[index]))
                if index:
                    push((1, ","))
            emit("[")
        elif t is dict or t is _FrozenDict:
            key = id(item)
            if key in path:
                raise _Lossy()
            path.add(key)
            push((2, key))
            push((1, "}"))
            entries = list(item.items())
            for index in range(len(entries) - 1, -1, -1):
                name, member = entries[index]
                if type(name) is not str:
                    raise _Lossy()
                push((0, member))
                push((1, _quote(name) + ":"))
                if index:
                    push((1, ","))
            emit("{")
        else:
            raise _Lossy()
    text = "".join(out)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise _Lossy() from None  # A lone surrogate.
    return text, size


# --- Logs ---------------------------------------------------------------------------------------


def _log(text):
    _send('{"type":"log","text":' + _quote(_clip(text)) + "}")


class _Stream:
    """`sys.stdout` / `sys.stderr`: one `log` frame per completed line."""

    encoding = "utf-8"
    errors = "strict"
    closed = False

    def __init__(self, name):
        self.name = name
        self._pending = []
        self._size = 0

    def write(self, text):
        if type(text) is not str:
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        lines = text.split("\n")
        if len(lines) == 1:
            self._pending.append(text)
            self._size += len(text)
            # A line that never ends still reaches the host once it alone exceeds the budget.
            if self._size > _max_output:
                self.flush_line()
            return len(text)
        self._pending.append(lines[0])
        _log("".join(self._pending))
        for line in lines[1:-1]:
            _log(line)
        self._pending = [lines[-1]] if lines[-1] else []
        self._size = len(lines[-1])
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush_line(self):
        if self._pending:
            text = "".join(self._pending)
            self._pending = []
            self._size = 0
            _log(text)

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def seekable(self):
        return False

    def fileno(self):
        raise OSError("the captured " + self.name + " has no file descriptor")


# --- Bindings -----------------------------------------------------------------------------------


def _message(key, **substitutions):
    # One pass, so a substituted text holding a placeholder (a tool named "{tools}") stays.
    parts = _MESSAGES[key].split("{")
    out = [parts[0]]
    for part in parts[1:]:
        name, brace, rest = part.partition("}")
        if brace and name in substitutions:
            out.append(str(substitutions[name]))
            out.append(rest)
        else:
            out.append("{" + part)
    return "".join(out)


def _binding_error(binding, message, data=None):
    error_class, member = binding._error
    error = error_class(message)
    if member is not None:
        setattr(error, member, binding._name)
    error.data = data
    return error


class _Call:
    __slots__ = ("id", "binding", "failure", "future")

    def _label(self):
        # As the program wrote the call: `web_search` for a bare global, else `tools.web_search`.
        binding = self.binding
        return binding._spelled or binding._global + "." + binding._name

    def _not_awaited(self, *args):
        # The call was made; its value is only reached through `await` (smolagents-style
        # programs call tools as if they were synchronous).
        raise TypeError(_message("notAwaited", binding=self._label()))

    # Printed, formatted, tested, measured, indexed, iterated, searched or compared in order:
    # a clear error at that use, never a silent `<_Call object>`.
    __str__ = __format__ = __bool__ = __len__ = __getitem__ = __iter__ = _not_awaited
    __contains__ = __lt__ = __le__ = __gt__ = __ge__ = __int__ = __float__ = _not_awaited
    __add__ = __radd__ = __sub__ = __mul__ = __truediv__ = _not_awaited

    def __getattr__(self, name):
        # Only names the class does not have: `result.get(...)`, `result.items`.
        if name.startswith("__"):
            raise AttributeError(name)
        self._not_awaited()

    def __repr__(self):
        return "<" + self._label() + "(...) call, not awaited>"

    def __await__(self):
        if self.failure is not None:
            raise self.failure
        if self.future is not None:
            return (yield from self.future.__await__())
        if self.id not in _results:
            yield self  # The manual driver reads frames until the reply is in.
        ok, payload, data = _results.pop(self.id)
        if ok:
            return payload
        raise _binding_error(self.binding, payload, data)


class _Binding:
    __slots__ = ("_global", "_name", "_error", "_parameters", "_spelled")

    def __init__(self, global_name, name, error, parameters, spelled=None):
        self._global = global_name
        self._name = name
        self._error = error
        # The bare global's name, for a function that is also a global.
        self._spelled = spelled
        # The input schema's property names, in order, when it describes an object: positional
        # arguments take them (`tools.query("SELECT 1")` is `{"sql": "SELECT 1"}`).
        self._parameters = parameters

    def _argument(self, label, args, kwargs):
        # One JSON argument: none is `null`, keywords are one object (docs/design.md §9 items 7-8).
        parameters = self._parameters
        if parameters is None:
            if args and kwargs:
                raise TypeError(_message("mixedArguments", binding=label))
            if len(args) > 1:
                raise TypeError(_message("tooManyArguments", binding=label, count=len(args)))
            return args[0] if args else (kwargs if kwargs else None)
        if len(args) > len(parameters):
            raise TypeError(_message(
                "tooManyPositional", binding=label, limit=len(parameters),
                names=", ".join(parameters), count=len(args),
            ))
        # An object (or nothing) given alone is the whole argument, as without a schema.
        if len(args) == 1 and not kwargs and (args[0] is None or type(args[0]) is dict):
            return args[0]
        if not args:
            return kwargs if kwargs else None
        argument = dict(zip(parameters, args))
        for name, value in kwargs.items():
            if name in argument:
                raise TypeError(_message("duplicateArgument", binding=label, name=name))
            argument[name] = value
        return argument

    def __call__(self, *args, **kwargs):
        global _next_id
        label = self._global + "." + self._name
        argument = self._argument(label, args, kwargs)
        call = _Call()
        call.binding = self
        call.failure = None
        call.future = None
        call.id = 0
        try:
            text, size = _encode(argument)
        except _Lossy:
            call.failure = _binding_error(self, _message("lossyArguments"))
            return call
        frame = (
            '{"type":"call","id":%d,"global":%s,"name":%s,"args":%s}'
            % (_next_id + 1, _quote(self._global), _quote(self._name), text)
        )
        if size + len(frame) - len(text) >= _max_frame:
            call.failure = _binding_error(self, _message("argumentsTooLarge", limit=_max_frame))
            return call
        _next_id += 1
        call.id = _next_id
        if _loop is not None:
            call.future = _loop.create_future()
            _futures[call.id] = (call.future, self)
        if _answers is not None and _recorded(self, call.id):
            _send_held(frame[:-1] + ',"replayed":true}')
            _give_recorded()
            return call
        _send(frame)
        return call

    def __repr__(self):
        return "<binding %s.%s>" % (self._global, self._name)


class _Namespace:
    __slots__ = ("_members", "_global")

    def __getattr__(self, name):
        try:
            return object.__getattribute__(self, "_members")[name]
        except KeyError:
            raise AttributeError(
                "%s has no binding %r" % (object.__getattribute__(self, "_global"), name)
            ) from None

    def __getitem__(self, name):
        return object.__getattribute__(self, "_members")[name]

    def __contains__(self, name):
        return name in object.__getattribute__(self, "_members")

    def __dir__(self):
        return list(object.__getattribute__(self, "_members"))

    def __repr__(self):
        return "<bindings %s>" % object.__getattribute__(self, "_global")


class _FrozenDict(dict):
    """A value of the request: a dict the program reads (and `json.dumps`) but cannot change."""

    __slots__ = ()

    def _frozen(self, *args, **kwargs):
        raise TypeError("this value is given by the host and cannot be changed; copy it first")

    __setitem__ = __delitem__ = __ior__ = __init__ = _frozen
    clear = pop = popitem = setdefault = update = _frozen

    def copy(self):
        return _copied(self, dict, list)

    def __copy__(self):
        return _copied(self, dict, list)

    def __deepcopy__(self, memo):
        return _copied(self, dict, list)


class _FrozenList(list):
    """A value of the request: a list the program reads but cannot change."""

    __slots__ = ()

    _frozen = _FrozenDict._frozen
    __setitem__ = __delitem__ = __iadd__ = __imul__ = __init__ = _frozen
    append = clear = extend = insert = pop = remove = reverse = sort = _frozen
    copy = __copy__ = _FrozenDict.copy
    __deepcopy__ = _FrozenDict.__deepcopy__


def _copied(value, mapping, sequence):
    # A copy of a JSON value whose dicts and lists are `mapping` and `sequence`, made without
    # recursion (the host bounds a value's depth, but the walk need not rely on it).
    kinds = {dict: mapping, _FrozenDict: mapping, list: sequence, _FrozenList: sequence}
    kind = kinds.get(type(value))
    if kind is None:
        return value
    root = kind.__new__(kind)
    open_ = [(value, root)]
    while open_:
        source, target = open_.pop()
        items = dict.items(source) if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            kind = kinds.get(type(item))
            if kind is not None:
                copy = kind.__new__(kind)
                open_.append((item, copy))
            else:
                copy = item
            if isinstance(target, dict):
                dict.__setitem__(target, key, copy)
            else:
                list.append(target, copy)
    return root


def _call_tool(tools, listing):
    def call_tool(name, *args, **kwargs):
        if type(name) is not str:
            raise TypeError(_message("toolName"))
        binding = tools.get(name)
        if binding is None:
            shown = name if len(name) <= 200 else name[:200]
            raise TypeError(_message("unknownTool", name=_quote(shown), tools=listing))
        return binding(*args, **kwargs)

    return call_tool


def _dispatch(frame):
    global _clock
    if frame.get("type") != "reply":
        return
    ident = frame["id"]
    at = frame.get("t")
    if at is not None and _clock is not None and at > _clock:
        _clock = at
    if frame["ok"]:
        payload = (True, frame["value"], None)
    else:
        payload = (False, frame["message"], frame.get("data"))
    waiting = _futures.pop(ident, None)
    if waiting is None:
        _results[ident] = payload
        return
    future, binding = waiting
    if future.done():
        return
    if payload[0]:
        future.set_result(payload[1])
    else:
        future.set_exception(_binding_error(binding, payload[1], payload[2]))


def _pump():
    line = _recv(spin=64)
    try:
        frame = _loads(line)
    except RecursionError:
        frame = _too_deep(line)
    _dispatch(frame)


def _too_deep(line):
    ident = _scan_id(line)
    return {"type": "reply", "id": ident, "ok": False, "message": _message("resolutionTooDeep")}


def _scan_id(line):
    start = line.index(b'"id":') + 5
    end = start
    while line[end : end + 1] not in (b",", b"}"):
        end += 1
    return int(line[start:end])


# --- Running the program ------------------------------------------------------------------------


def _drive(coroutine):
    """Runs a coroutine whose only awaits are binding calls, without an event loop."""
    send = None
    throw = None
    while True:
        try:
            if throw is None:
                awaited = coroutine.send(send)
            else:
                awaited, throw = coroutine.throw(throw), None
        except StopIteration as stop:
            return stop.value
        if type(awaited) is _Call:
            while awaited.id not in _results:
                _pump()
        else:
            throw = RuntimeError(
                "the program awaited something other than a binding call; "
                "import asyncio to use asyncio"
            )


async def _awaited(value):
    return await value


def _run_asyncio(main):
    global _loop
    import asyncio

    def on_readable():
        chunk = _read(_FD, 1 << 16)
        if not chunk:
            _exit(70)
        _inbox.extend(chunk)
        while True:
            end = _inbox.find(b"\n")
            if end < 0:
                return
            line = bytes(_inbox[:end])
            del _inbox[: end + 1]
            try:
                frame = _loads(line)
            except RecursionError:
                frame = _too_deep(line)
            _dispatch(frame)

    if _real_monotonic is not None:
        # The loop schedules on the machine's clock; the program reads the run's.
        asyncio.base_events.BaseEventLoop.time = lambda self: _real_monotonic()

    async def runner():
        _loop.add_reader(_FD, on_readable)
        try:
            value = await main()
            # A returned awaitable is awaited, as a returned promise is in TypeScript.
            while hasattr(value, "__await__"):
                value = await value
            return value
        finally:
            _loop.remove_reader(_FD)

    _loop = asyncio.new_event_loop()
    try:
        return _loop_run(asyncio, _loop, runner())
    finally:
        _loop = None


def _loop_run(asyncio, loop, coroutine):
    """What `asyncio.run` does with `coroutine`, less what a program's process has no use for: a
    SIGINT handler (nothing sends one) and a copied context (the process runs nothing else). Its
    first call in a fork copies a fifth fewer of the zygote's pages (348 page faults against
    425, and 0.25 ms less, in a fork of an interpreter holding the standard modules:
    `asyncio.Runner` also touches `signal`, `threading` and `contextvars`). The loop is the
    current one while it runs; tasks still pending when `coroutine` ends are cancelled and
    awaited, async generators closed, the default executor's threads joined, as `asyncio.run`
    does."""
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coroutine)
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            for task in pending:
                if not task.cancelled() and task.exception() is not None:
                    loop.call_exception_handler({
                        "message": "unhandled exception in a task cancelled as the program ended",
                        "exception": task.exception(),
                        "task": task,
                    })
            loop.run_until_complete(_shut_down(loop))
        finally:
            asyncio.set_event_loop(None)
            loop.close()


async def _shut_down(loop):
    # What `asyncio.run` does after the program, as one task rather than two (neither raises).
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()


def _render(error):
    try:
        import linecache
        import traceback

        linecache.cache[_PROGRAM] = (len(_source), None, _source.splitlines(True), _PROGRAM)
        report = traceback.TracebackException(type(error), error, error.__traceback__)
        seen = set()
        pending = [report]
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            # Only the program's own frames: the bootstrap's and the standard library's are
            # noise to its author, and their paths are the host's.
            kept = [frame for frame in current.stack if frame.filename == _PROGRAM]
            current.stack = traceback.StackSummary.from_list(kept)
            pending.extend(x for x in (current.__cause__, current.__context__) if x is not None)
        return "".join(report.format()).rstrip("\n")
    except BaseException:
        return _message("unrenderable")


def _done_error(kind, message):
    return '{"type":"done","error":{"kind":"%s","message":%s}}' % (kind, _quote(_clip(message)))


def _segments(module):
    # `servers.google-drive` and `servers/google_drive` alike: identifier-like segments.
    out = []
    for segment in module.replace("/", ".").split("."):
        if segment:
            out.append("".join(c if c.isalnum() else "_" for c in segment))
    return out


def _import_assignments(node, namespaces):
    # The assignments an import of bindings stands for, or None when it is not one: a module path
    # with a segment named like a namespace (`from servers.google_drive import get_document`,
    # `import tools`), or, for a module that is not the standard library's, a function only one
    # namespace has (`from servers import get_document`). The TypeScript rule, in Python.
    at = dict(lineno=node.lineno, col_offset=node.col_offset,
              end_lineno=node.end_lineno, end_col_offset=node.end_col_offset)

    def assign(local, global_name, member=None):
        if member is None and local == global_name:
            # `import tools` names what is there already; an assignment would make it a local
            # of the wrapper, unbound before it.
            return _ast.Pass(**at)
        value = _ast.Name(id=global_name, ctx=_ast.Load(), **at)
        if member is not None:
            value = _ast.Subscript(value=value, slice=_ast.Constant(value=member, **at),
                                   ctx=_ast.Load(), **at)
        return _ast.Assign(targets=[_ast.Name(id=local, ctx=_ast.Store(), **at)], value=value, **at)

    if type(node) is _ast.Import:
        out = []
        for alias in node.names:
            segments = _segments(alias.name)
            named = [s for s in segments if s in namespaces]
            if not named:
                return None
            local = alias.asname or segments[0]
            if alias.asname is None and len(segments) > 1:
                return None  # `import a.b` binds `a`, which no binding is.
            out.append(assign(local, named[-1]))
        return out
    # A relative import (`from .servers.tools import search`) is never the standard library's.
    segments = _segments(node.module or "")
    return _from_assignments(node, segments, namespaces, assign, bool(node.level))


def _from_assignments(node, segments, namespaces, assign, local):
    named = [s for s in segments if s in namespaces]
    standard = getattr(sys, "stdlib_module_names", sys.builtin_module_names)
    foreign = not local and segments and (segments[0] in standard or segments[0] in sys.modules)
    out = []
    for alias in node.names:
        if alias.name == "*":
            return None
        target = alias.asname or alias.name
        if alias.name in namespaces and not named:
            out.append(assign(target, alias.name))
            continue
        having = [g for g, members in namespaces.items() if alias.name in members]
        chosen = [g for g in having if g in named]
        if chosen:
            out.append(assign(target, chosen[-1], alias.name))
        elif len(having) == 1 and not named and not foreign:
            out.append(assign(target, having[0], alias.name))
        else:
            return None
    return out


def _asyncio_run(statement):
    # `asyncio.run(main())` (a script's ending): the argument, to await in the running loop.
    if type(statement) is not _ast.Expr or type(statement.value) is not _ast.Call:
        return None
    call = statement.value
    function = call.func
    if (type(function) is _ast.Attribute and function.attr == "run"
            and type(function.value) is _ast.Name and function.value.id == "asyncio"
            and len(call.args) == 1 and not call.keywords):
        return call.args[0]
    return None


def _returning(statement, value):
    return _ast.Return(
        value=value, lineno=statement.lineno, col_offset=statement.col_offset,
        end_lineno=statement.end_lineno, end_col_offset=statement.end_col_offset,
    )


def _awaiting(statement, value):
    return _ast.Await(
        value=value, lineno=statement.lineno, col_offset=statement.col_offset,
        end_lineno=statement.end_lineno, end_col_offset=statement.end_col_offset,
    )


def _normalised(body, scope):
    # Imports of bindings become assignments; `asyncio.run(x)` ending the program (alone, or as
    # the last statement of `if __name__ == "__main__":`) becomes `return await x`.
    namespaces = {
        name: object.__getattribute__(value, "_members")
        for name, value in scope.items() if type(value) is _Namespace
    }
    out = []
    leading = 0
    for statement in body:
        assignments = None
        if type(statement) in (_ast.Import, _ast.ImportFrom):
            assignments = _import_assignments(statement, namespaces)
        if assignments is None:
            out.append(statement)
        else:
            out.extend(assignments)
            if leading == len(out) - len(assignments):
                leading = len(out)
    if out:
        last = out[-1]
        guarded = (type(last) is _ast.If and not last.orelse and type(last.test) is _ast.Compare
                   and type(last.test.left) is _ast.Name and last.test.left.id == "__name__")
        holder = last.body if guarded else out
        argument = _asyncio_run(holder[-1])
        if argument is not None:
            holder[-1] = _returning(holder[-1], _awaiting(holder[-1], argument))
    return out, leading


def _execute(program, scope):
    try:
        tree = compile(program, _PROGRAM, "exec", _ast.PyCF_ONLY_AST)
        if _session is not None:
            _session_defined.extend(_session_definitions(program, tree.body))
        body, leading = _normalised(tree.body, scope)
        body = body or [_ast.Pass(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)]
        # A program that ends with an expression gives its value, as a notebook cell does.
        last = body[-1]
        if len(body) == leading + 1 and type(last) in (_ast.FunctionDef, _ast.AsyncFunctionDef):
            # A program that is one function is called (its coroutine is awaited below).
            at = dict(lineno=last.end_lineno, col_offset=0, end_lineno=last.end_lineno, end_col_offset=0)
            call = _ast.Call(func=_ast.Name(id=last.name, ctx=_ast.Load(), **at), args=[], keywords=[], **at)
            body.append(_ast.Return(value=call, **at))
        elif type(last) is _ast.Expr:
            body[-1] = _ast.Return(
                value=last.value, lineno=last.lineno, col_offset=last.col_offset,
                end_lineno=last.end_lineno, end_col_offset=last.end_col_offset,
            )
        arguments = _ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
        )
        function = _ast.AsyncFunctionDef(
            name=_WRAPPER, args=arguments, body=body, decorator_list=[], returns=None,
            type_comment=None, lineno=1, col_offset=0, end_lineno=1, end_col_offset=0,
        )
        if "type_params" in _ast.AsyncFunctionDef._fields:
            function.type_params = []
        if _session is not None:
            _session_globals(function, program)
        code = compile(_ast.Module(body=[function], type_ignores=[]), _PROGRAM, "exec")
    except SyntaxError as error:
        return _done_error("exception", _render(error))
    exec(code, scope)
    main = scope.pop(_WRAPPER)
    main.__code__ = main.__code__.replace(co_name="<module>")
    try:
        if "asyncio" in program:
            value = _run_asyncio(main)
        else:
            coroutine = main()
            if not hasattr(coroutine, "send"):
                raise SyntaxError("'yield' is not allowed in the program body")
            value = _drive(coroutine)
            # A returned awaitable is awaited, as a returned promise is in TypeScript.
            while hasattr(value, "__await__"):
                value = _drive(_awaited(value))
    except BaseException as error:
        return _done_error("exception", _render(error))
    if value is None:
        return '{"type":"done"}'
    if callable(value):
        return _done_error("invalid-output", "function")
    try:
        text, size = _encode(value)
    except _Lossy:
        return _done_error("invalid-output", "")
    # The host meters the value exactly (JavaScript number spelling); this bound only keeps a
    # value that cannot fit from crossing, with slack for Python's longer spellings.
    if size > _max_output + _max_output // 2 + 64:
        return _done_error("output-limit", "")
    return '{"type":"done","value":' + text + "}"


def _recorded(binding, ident):
    """Whether the record answers this call of `binding`, the program's next: its reply is then
    kept for its turn."""
    global _made
    index = _made
    _made += 1
    entry = _answers[index] if index < len(_answers) else None
    if entry is None:
        return False
    function = _functions[entry[0]]
    if function._global != binding._global or function._name != binding._name:
        return False
    _answers[index] = None
    reply = {"type": "reply", "id": ident, "ok": entry[3], "t": entry[2]}
    if entry[3]:
        reply["value"] = entry[4]
    else:
        reply["message"] = entry[4]
        reply["data"] = entry[5]
    _ready[entry[1]] = reply
    return True


def _give_recorded():
    """Hands the program the recorded replies whose turn has come, in their first order. Under
    asyncio, one a turn of the loop, as live replies arrive: the next waits until what the last
    one woke has run, so calls that raced settle as they did the first time (settled at once,
    all would be done before the program looks, and asyncio has no order for futures already
    done)."""
    global _next_rank
    while _next_rank in _ready:
        _due.append(_ready.pop(_next_rank))
        _next_rank += 1
    if _loop is None:
        while _due:
            _dispatch(_due.pop(0))
    elif _due and not _settling:
        _settle_later()


def _settle_one():
    global _settling
    _settling = False
    if _due:
        _dispatch(_due.pop(0))
    if _due:
        _settle_later()


def _settle_later():
    """`_settle_one` on a later turn: queued after the callbacks the last reply scheduled (its
    task's wake-up), from the loop's thread or another (a binding called in `asyncio.to_thread`)."""
    global _settling
    _settling = True
    if sys.modules["asyncio"]._get_running_loop() is _loop:
        _loop.call_soon(_settle_one)
    else:
        _loop.call_soon_threadsafe(_settle_one)


def _reading():
    global _clock
    _clock += _STEP_MS
    return _clock


def _reproducible(replay):
    """A run that may pause reads its randomness from the run's seed and its clock from the
    host's replies, so that it prints the same numbers when it runs again from the start."""
    global _clock, _real_monotonic, _answers
    _answers = replay.get("answers")
    import datetime
    import os
    import random
    import time

    seed = int(replay["seed"], 16)
    started = float(replay["startedMs"])
    _clock = started
    random.seed(seed)
    source = random.Random(seed ^ 0x9E3779B97F4A7C15)

    def urandom(size):
        if size < 0:
            raise ValueError("negative argument not allowed")
        return source.randbytes(size)

    # `uuid.uuid4`, `secrets` and `random.SystemRandom` read these.
    os.urandom = urandom
    random._urandom = urandom
    _real_monotonic = time.monotonic

    def since_start():
        return (_reading() - started) / 1000

    time.time = lambda: _reading() / 1000
    time.time_ns = lambda: int(_reading() * 1_000_000)
    time.monotonic = time.perf_counter = since_start
    time.monotonic_ns = time.perf_counter_ns = lambda: int((_reading() - started) * 1_000_000)

    # `date.today()` and `datetime.today()` call `time.time()`; `now` reads the system clock.
    class _DateTime(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls.fromtimestamp(time.time(), tz)

        @classmethod
        def utcnow(cls):
            return cls.utcfromtimestamp(time.time())

    _DateTime.__name__ = _DateTime.__qualname__ = "datetime"
    _DateTime.__module__ = "datetime"
    datetime.datetime = _DateTime


def _main():
    global _max_output, _max_frame, _source, _WRAPPER, _MESSAGES, _functions, _session
    boot = _loads(_recv())
    _session = boot.get("session")
    if _session is not None:
        _session_blob_read(sum(value["bytes"] for value in _session["values"]))
    if boot.get("version") != _VERSION:
        # A host of another build: exit before `boot-ack`, which the run reports with this line.
        _write(2, (
            "code-runtime: the host speaks version %r of the fd-3 frames, this bootstrap %d\n"
            % (boot.get("version"), _VERSION)
        ).encode())
        _exit(70)
    _max_output = boot["maxOutputBytes"]
    _max_frame = boot["maxFrameBytes"]
    _WRAPPER = boot["wrapper"]
    _MESSAGES = boot["messages"]
    if "replay" in boot:
        _reproducible(boot["replay"])
    scope = {"__builtins__": builtins, "__name__": "__main__"}
    functions = _functions  # Every binding, in the host's function order.
    for declared in boot["namespaces"]:
        global_name = declared["global"]
        error_class = declared.get("errorClass")
        if error_class is None:
            error = (Exception, None)
        else:
            cls = type(error_class["name"], (Exception,), {"__module__": "builtins"})
            scope[error_class["name"]] = cls
            error = (cls, error_class["memberNameProperty"])
        namespace = _Namespace()
        object.__setattr__(namespace, "_global", global_name)
        members = {
            name: _Binding(global_name, name, error, declared.get("parameters", {}).get(name))
            for name in declared["names"]
        }
        functions.extend(members.values())
        object.__setattr__(namespace, "_members", members)
        scope[global_name] = namespace
    tools = boot.get("tools")
    for declared in boot.get("globals", ()):
        if "function" in declared:
            member = functions[declared["function"]]
            scope[declared["name"]] = _Binding(
                member._global, member._name, member._error, member._parameters, declared["name"]
            )
        elif "callTool" in declared:
            names = {name: functions[index] for name, index in tools["names"]}
            scope[declared["name"]] = _call_tool(names, tools["listing"])
        else:
            scope[declared["name"]] = _copied(declared["value"], _FrozenDict, _FrozenList)
    _send('{"type":"boot-ack"}')
    _source = _loads(_recv())["program"]
    stdout, stderr = _Stream("stdout"), _Stream("stderr")
    sys.stdout, sys.stderr = stdout, stderr
    sys.setrecursionlimit(20000)
    # Modules programs use without importing them (code-mode prompts often show them as given);
    # imported only when the program mentions them, and never over a namespace of that name.
    for module in ("json", "asyncio"):
        if module in _source and module not in scope:
            scope[module] = __import__(module)
    if _session is not None:
        scope = _session_scope(scope)
        _session_restore(scope)
    done = _execute(_source, scope)
    stdout.flush_line()
    stderr.flush_line()
    if _session is not None:
        _flush()
        _write_all(_session_state(scope))
    _send(done)
    _exit(0)


# A zygote loads the bootstrap once and runs `_main` in each fork instead (zygote.py).
if not globals().get("_ZYGOTE"):
    _main()

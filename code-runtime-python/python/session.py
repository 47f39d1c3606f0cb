# Sessions, the child's side (docs/python-frame-protocol.md, "Sessions"). Compiled in front of
# bootstrap.py, whose helpers (`_send`, `_quote`, `_normalised`, `_PROGRAM`, `_WRAPPER`) these
# functions call.
#
# In a session, the program's top-level names are the globals of a module registered as
# `__main__` (so pickle finds the classes it defines), not locals of its wrapper. Before the
# program, the session's definitions (top-level imports, functions and classes of earlier runs,
# as source) run in order, then its values (pickle protocol 5) are loaded. When the program ends,
# one `state` frame says what carries: every definition, every value pickled (within the
# session's byte budget), and each name that cannot carry with the reason.

import sys
import _ast

_session = None
# The names the bootstrap put in the scope (namespaces, error classes, the request's values),
# which are the run's, not the session's.
_session_injected = frozenset()
# What the replayed definitions bound, by name: a definition of this run whose statement never
# ran leaves these in place, and the earlier definition still carries.
_session_replayed = {}
# This run's top-level definitions, `(names, kind, source)`, in program order.
_session_defined = []
# What could not be restored or cannot carry, `(name, why)`.
_session_lost = []
_ENTRY_BYTES = 64
_MAX_NAME_BYTES = 256
# The values' bytes, as they followed the boot line (a bytearray, so that an array restored from
# it without a copy can be written to).
_session_blob = None


def _session_scope(scope):
    """The program's scope as the globals of a module `__main__`, so that a class it defines
    pickles by reference and is found again when its instances are loaded."""
    module = type(sys)("__main__")
    module.__dict__.update(scope)
    sys.modules["__main__"] = module
    return module.__dict__


def _session_replay(source, scope):
    tree = compile(source, "<session>", "exec", _ast.PyCF_ONLY_AST)
    body, _ = _normalised(tree.body, scope)
    exec(compile(_ast.Module(body=body, type_ignores=[]), "<session>", "exec"), scope)


def _session_restore(scope):
    """Runs the session's definitions, then loads its values. A definition that needs a value
    (a default argument, a decorator) runs again once the values are there. A name the run
    itself was given (a namespace, a value of the request) is the run's: the session's is not
    restored over it."""
    global _session_injected
    _session_injected = frozenset(scope)
    import pickle

    def replay(definition):
        if any(name in _session_injected for name in definition["names"]):
            _session_lost.extend((name, "the run has a name of its own like it")
                                 for name in definition["names"])
            return
        try:
            _session_replay(definition["source"], scope)
        except NameError:
            return definition
        except BaseException as error:
            _session_lost.extend((name, "its definition failed: %s" % _clipped(error))
                                 for name in definition["names"])

    later = [d for d in _session["definitions"] if replay(d) is not None]
    blob = memoryview(_session_blob) if _session_blob is not None else memoryview(b"")
    at = 0
    for value in _session["values"]:
        name, size = value["name"], value["bytes"]
        data = blob[at:at + size]
        at += size
        if name in _session_injected:
            _session_lost.append((name, "the run has a name of its own like it"))
            continue
        try:
            scope[name] = _unpickled(data, pickle)
        except BaseException as error:
            _session_lost.append((name, "it could not be restored: %s" % _clipped(error)))
    for definition in later:
        try:
            _session_replay(definition["source"], scope)
        except BaseException as error:
            _session_lost.extend((name, "its definition failed: %s" % _clipped(error))
                                 for name in definition["names"])
    for definition in _session["definitions"]:
        for name in definition["names"]:
            if name in scope:
                _session_replayed[name] = scope[name]


def _unpickled(data, pickle):
    # A value's bytes: how many out-of-band buffers (4 bytes), each one's length (8 bytes), the
    # pickle, then the buffers, which the value is made over without a copy.
    count = int.from_bytes(data[:4], "big")
    lengths = [int.from_bytes(data[4 + 8 * i:12 + 8 * i], "big") for i in range(count)]
    start = 4 + 8 * count
    end = len(data) - sum(lengths)
    buffers = []
    at = end
    for length in lengths:
        buffers.append(data[at:at + length])
        at += length
    return pickle.loads(data[start:end], buffers=buffers)


def _pickled(value, room, pickle):
    """The pieces of `value`'s bytes (see `_unpickled`), its out-of-band buffers never copied;
    `_Full` as soon as they pass `room`."""
    writer = _Bounded(room)
    buffers = []

    def out_of_band(buffer):
        raw = buffer.raw()
        writer.size += raw.nbytes
        if writer.size > room:
            raise _Full()
        buffers.append(raw)
        return False

    pickle.Pickler(writer, protocol=5, buffer_callback=out_of_band).dump(value)
    head = [len(buffers).to_bytes(4, "big")] + [raw.nbytes.to_bytes(8, "big") for raw in buffers]
    return head + writer.parts + buffers


def _clipped(error):
    text = _text("%s: %s" % (type(error).__name__, error))
    return text if len(text) <= 300 else text[:297] + "..."


def _text(text):
    # What the host can read: lone surrogates shown escaped.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _lines(program):
    # The program's lines as the parser counts them: split at \r\n, \r and \n only
    # (`str.splitlines` also splits at form feeds and U+2028, which the parser does not).
    out = []
    start = 0
    size = len(program)
    i = 0
    while i < size:
        c = program[i]
        if c == "\n" or c == "\r":
            end = i + 2 if c == "\r" and program[i + 1:i + 2] == "\n" else i + 1
            out.append(program[start:end])
            start = i = end
        else:
            i += 1
    if start < size:
        out.append(program[start:])
    return out


def _session_definitions(program, body):
    """The top-level imports, functions and classes of the program, each a statement of its own
    line, as `(names, kind, source)`; its source cut at the statement's end."""
    found = []
    lines = _lines(program)
    for node in body:
        kind = _DEFINITION_KINDS.get(type(node))
        if kind is None or node.col_offset != 0 or node.end_lineno is None:
            continue
        if kind == "import" and any(alias.name == "*" for alias in node.names):
            _session_lost.append(("*", "a star import does not carry: import the names"))
            continue
        if kind == "function" and _declares_nonlocal(node):
            _session_lost.append((node.name, "a function that declares a top-level name nonlocal cannot be defined again"))
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        chunk = lines[first - 1:node.end_lineno]
        if not chunk:
            continue
        # `end_col_offset` counts UTF-8 bytes.
        last = chunk[-1].encode("utf-8")
        chunk[-1] = last[:node.end_col_offset].decode("utf-8", "replace") + "\n"
        source = "".join(chunk)
        if kind == "import":
            names = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        else:
            names = [node.name]
        found.append((names, kind, source))
    return found


_DEFINITION_KINDS = {
    _ast.Import: "import",
    _ast.ImportFrom: "import",
    _ast.FunctionDef: "function",
    _ast.AsyncFunctionDef: "function",
    _ast.ClassDef: "class",
}
_SCOPES = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)


def _declares_nonlocal(function):
    return any(type(node) is _ast.Nonlocal for node in _statements(function.body))


def _statements(body):
    # The statements of a function's own scope (not of the functions and classes in it).
    pending = list(body)
    while pending:
        node = pending.pop()
        yield node
        if type(node) in _SCOPES:
            continue
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if type(block) is list:
                pending.extend(item for item in block if isinstance(item, _ast.stmt))
        for part in list(getattr(node, "handlers", ())) + list(getattr(node, "cases", ())):
            pending.extend(part.body)


def _unannotated(statements):
    """`x: int = 1` at the program's level becomes `x = 1` (an annotated name cannot be declared
    global), and `x: int` nothing; nested functions and classes keep theirs."""
    out = []
    for node in statements:
        if type(node) is _ast.AnnAssign and type(node.target) is _ast.Name:
            if node.value is None:
                continue
            node = _ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno,
                               col_offset=node.col_offset, end_lineno=node.end_lineno,
                               end_col_offset=node.end_col_offset)
        elif type(node) not in _SCOPES:
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if type(block) is list and block and isinstance(block[0], _ast.stmt):
                    setattr(node, field, _unannotated(block))
            for part in list(getattr(node, "handlers", ())) + list(getattr(node, "cases", ())):
                part.body = _unannotated(part.body)
        out.append(node)
    if not out and statements:
        first = statements[0]
        out.append(_ast.Pass(lineno=first.lineno, col_offset=first.col_offset,
                             end_lineno=first.end_lineno, end_col_offset=first.end_col_offset))
    return out


def _nonlocal_names(root, depth_one):
    """The names declared nonlocal in the functions under `root`: only in those directly under
    it when `depth_one`, else in all of them."""
    names = set()
    pending = [(root, 0)]
    while pending:
        node, depth = pending.pop()
        # The wrapper is at depth 1: a function directly in it at 2.
        if type(node) is _ast.Nonlocal and (depth == 2 or not depth_one):
            names.update(node.names)
        deeper = depth + 1 if type(node) in (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.Lambda) else depth
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                pending.extend((item, deeper) for item in value if isinstance(item, _ast.AST))
            elif isinstance(value, _ast.AST):
                pending.append((value, deeper))
    return names


def _session_globals(function, program):
    """Declares the wrapper's locals global: the program's top-level names then live in the
    module's scope, where the next run finds them. A name a function declares `nonlocal` stays
    the wrapper's, and does not carry (said in `dropped`)."""
    function.body = _unannotated(function.body)
    code = compile(_ast.Module(body=[function], type_ignores=[]), _PROGRAM, "exec")
    wrapper = next(c for c in code.co_consts if type(c) is type(code) and c.co_name == _WRAPPER)
    names = set(wrapper.co_varnames) | set(wrapper.co_cellvars)
    at = dict(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)
    original = function.body
    for depth_one in (True, False):
        local = names & _nonlocal_names(function, depth_one)
        declared = sorted(names - local)
        function.body = ([_ast.Global(names=declared, **at)] if declared else []) + original
        try:
            compile(_ast.Module(body=[function], type_ignores=[]), _PROGRAM, "exec")
        except SyntaxError:
            continue  # A nonlocal deeper down names the wrapper's: keep them all local.
        _session_lost.extend((name, "a function declares it nonlocal: it stays the program's and does not carry")
                             for name in sorted(local))
        return
    function.body = original
    _session_lost.append(("*", "the program's names could not be made the session's: nothing it made carries"))


class _Full(Exception):
    pass


class _Bounded:
    """A file pickle writes to, which refuses to hold more than `room` bytes: a value past the
    session's budget stops being pickled as soon as it passes it, never copied whole."""

    def __init__(self, room):
        self.room = room
        self.parts = []
        self.size = 0

    def write(self, data):
        size = len(data) if type(data) is bytes else memoryview(data).nbytes
        if self.size + size > self.room:
            raise _Full()
        self.parts.append(bytes(data))
        self.size += size
        return size


def _why_not(value, types):
    """Why `value` cannot carry as a value, or None."""
    if isinstance(value, types.GeneratorType):
        return "a generator (it cannot be saved)"
    if isinstance(value, types.CoroutineType):
        value.close()
        return "a coroutine (await it, and keep its result)"
    if isinstance(value, types.AsyncGeneratorType):
        return "an async generator (it cannot be saved)"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)) \
            or type(value).__name__ in ("partial", "_Binding"):
        return "a function held in a variable (a top-level def carries; a value holding one does not)"
    if isinstance(value, type):
        return "a class not made by a top-level class statement"
    io = sys.modules.get("io")
    if io is not None and isinstance(value, io.IOBase):
        return "an open file (files do not carry; keep what you read from it)"
    socket = sys.modules.get("socket")
    if socket is not None and isinstance(value, socket.socket):
        return "a socket (sockets do not carry)"
    return None


def _defined_here(names, kind, source, scope, types):
    """Whether this run's definition of `names` ran and still holds them: each name bound to
    what its statement made (not what an earlier run's definition made, nor a value bound to
    it since)."""
    for name in names:
        value = scope.get(name, _MISSING)
        if value is _MISSING or (name in _session_replayed and value is _session_replayed[name]):
            return False
        if kind == "function" and not (type(value) is types.FunctionType and value.__code__.co_filename == _PROGRAM):
            return False
        if kind == "class" and not (isinstance(value, type) and value.__module__ == "__main__"):
            return False
        if kind == "import" and source.startswith("import ") and type(value) is not types.ModuleType:
            return False
    return True


_MISSING = object()


def _session_state(scope):
    """The `state` frame: what carries to the session's next run, and what does not."""
    import pickle
    import types

    budget = _session["maxBytes"]
    definitions = {}
    for definition in _session["definitions"]:
        names = definition["names"]
        # An earlier definition carries while what it made is still what its names hold.
        if all(name in _session_replayed and scope.get(name, _MISSING) is _session_replayed[name] for name in names):
            definitions[tuple(names)] = (names, definition["kind"], definition["source"])
    for names, kind, source in _session_defined:
        if not _defined_here(names, kind, source, scope, types):
            continue
        for key in [key for key in definitions if set(key) <= set(names)]:
            del definitions[key]
        definitions[tuple(names)] = (names, kind, source)
    dropped = list(_session_lost)
    as_source = set()
    kept_definitions = []
    for names, kind, source in definitions.values():
        kept_definitions.append((names, kind, source))
        as_source.update(names)
    values = []
    for name, value in list(scope.items()):
        if name in as_source or (name.startswith("__") and name.endswith("__")):
            continue
        if _text(name) != name or len(name.encode("utf-8")) > _MAX_NAME_BYTES:
            dropped.append((_text(name)[:64], "a name longer than 256 bytes, or not valid Unicode"))
            continue
        try:
            if type(value) is types.ModuleType:
                module = value.__name__
                source = "import %s\n" % module if name == module else "import %s as %s\n" % (module, name)
                if "." in module and name == module.split(".")[0]:
                    source = "import %s\n" % module
                kept_definitions.append(([name], "import", source))
                continue
            if name in _session_injected:
                continue
            why = _why_not(value, types)
        except BaseException as error:
            why = "it could not be looked at: %s" % _clipped(error)
        if why is not None:
            dropped.append((name, why))
            continue
        values.append((name, value))
    used = sum(len(source.encode("utf-8")) + sum(len(n.encode("utf-8")) for n in names) + len(kind) + _ENTRY_BYTES
               for names, kind, source in kept_definitions)
    headers = []
    pieces = []
    over = used > budget
    for name, value in values:
        if over:
            break
        kind = _text(type(value).__name__)[:_MAX_NAME_BYTES]
        room = budget - used - len(name.encode("utf-8")) - len(kind.encode("utf-8")) - _ENTRY_BYTES
        try:
            parts = _pickled(value, max(room, 0), pickle)
        except _Full:
            over = True
            break
        except BaseException as error:
            dropped.append((name, "pickle refused it: %s" % _clipped(error)))
            continue
        size = sum(len(part) if type(part) is bytes else memoryview(part).nbytes for part in parts)
        used += size + len(name.encode("utf-8")) + len(kind.encode("utf-8")) + _ENTRY_BYTES
        headers.append('{"name":%s,"type":%s,"bytes":%d}' % (_quote(name), _quote(kind), size))
        pieces.extend(parts)
    if over:
        why = ("the session's state would pass maxSessionBytes (%d bytes): the session keeps "
               "the state this run began with" % budget)
        dropped.extend((name, why) for name, _ in values)
        headers, pieces = [], []
    header = ['{"type":"state","over":%s,"definitions":[' % ("true" if over else "false")]
    header.append(",".join('{"names":[%s],"kind":%s,"source":%s}' % (
        ",".join(_quote(n) for n in names), _quote(kind), _quote(_text(source)))
        for names, kind, source in kept_definitions))
    header.append('],"values":[')
    header.append(",".join(headers))
    header.append('],"dropped":[')
    header.append(",".join('{"name":%s,"why":%s}' % (_quote(_text(name)), _quote(_text(why))) for name, why in dropped[:1000]))
    header.append("]}\n")
    head = "".join(header).encode("utf-8")
    size = len(head) + sum(len(piece) if type(piece) is bytes else memoryview(piece).nbytes for piece in pieces)
    # A binary frame: a NUL, the length, the header line, the values' bytes (one copy, here).
    return b"".join([b"\0", size.to_bytes(4, "big"), head] + pieces)

"""`Runtime`: one language's provider, and the runs it makes."""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import dataclasses
import inspect
import os
import weakref
from dataclasses import dataclass, field
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _native
from ._namespace import Namespace, on_loop
from ._session import Session, SessionReport, session_report

ContractError = _native.ContractError

Language = Literal["python", "typescript"]
Isolation = Literal["process", "thread"]
FailureKind = Literal[
    "exception", "timeout", "abort", "worker-exit", "invalid-output", "output-limit"
]


@dataclass(frozen=True)
class Limits:
    """Budgets: a runtime's for every run, or one run's, which may only tighten them.

    ``None`` leaves a budget as it is (the provider's default, or the runtime's).
    """

    #: CPU time, in milliseconds (default 60 000).
    compute_ms: Optional[int] = None
    #: The wall clock, in milliseconds (default 600 000).
    max_wall_ms: Optional[int] = None
    #: Logs plus the value or the error, in bytes of JSON (default 64 MiB).
    max_output_bytes: Optional[int] = None
    #: Memory, in MiB (default 512).
    max_memory_mb: Optional[int] = None
    #: Binding calls in all (default 10 000).
    max_calls: Optional[int] = None
    #: Calls to any one function (default 10 000).
    max_calls_per_function: Optional[int] = None
    #: Calls the host runs at once (default 1 000).
    max_pending_calls: Optional[int] = None
    #: What a session carries from one run to the next, in bytes (default 64 MiB).
    max_session_bytes: Optional[int] = None
    #: How long a session may stay unused before it expires, in milliseconds (default an hour).
    session_idle_ms: Optional[int] = None
    #: How many sessions a runtime keeps; the least recently used is evicted first (default 1 000).
    max_sessions: Optional[int] = None


LimitsLike = Union[Limits, Mapping[str, Optional[int]], None]


def _limits(limits: LimitsLike) -> Optional[Dict[str, Optional[int]]]:
    if limits is None:
        return None
    if isinstance(limits, Limits):
        return dataclasses.asdict(limits)
    return dict(limits)


@dataclass(frozen=True)
class RunError:
    """Why a run failed: ``kind`` is one of six, ``message`` says it as the program would."""

    kind: FailureKind
    message: str


@dataclass(frozen=True)
class PendingCall:
    """A call of a paused run that waits for a decision: decide it by ``id`` on resume."""

    id: int
    namespace: str
    function: str
    args: Any


@dataclass(frozen=True)
class RunResult:
    """What a run printed and returned, or why it failed, or where it paused."""

    #: The lines the program printed, in order.
    logs: List[str]
    #: The returned value (``None`` when it returned nothing or failed).
    value: Any = None
    #: Why it failed, or ``None``.
    error: Optional[RunError] = None
    #: A paused run's signed checkpoint, for :meth:`Runtime.resume`.
    checkpoint: Optional[bytes] = None
    #: A paused run's calls that wait for a decision.
    pending: List[PendingCall] = field(default_factory=list)
    #: How much the result was shrunk to fit ``truncate``; ``None`` when it came back whole.
    truncated: Optional["Truncated"] = None
    #: What the run's session carried (``None`` for a run in no session).
    session: Optional[SessionReport] = None

    @property
    def ok(self) -> bool:
        """Whether the program ran to its end (not failed, not paused)."""
        return self.error is None and self.checkpoint is None

    @property
    def paused(self) -> bool:
        """Whether the run paused for decisions (see :attr:`pending`)."""
        return self.checkpoint is not None


@dataclass(frozen=True)
class Truncated:
    """A result shrunk to its run's ``truncate`` budget: its output's size (the logs as a JSON
    array, plus the value or the error's message) before and after."""

    from_bytes: int
    to_bytes: int


@dataclass(frozen=True)
class ApprovalRequest:
    """A call that waits for the approver: where, with what, and its number in the run."""

    namespace: str
    function: str
    args: Any
    #: One line for a person: ``github.delete_repo({"name":"infra"})``, cut at 200 bytes.
    summary: str
    #: The call's number in the run (what a paused run's pending calls carry).
    call: int


@dataclass(frozen=True)
class Decision:
    """The approver's answer: :meth:`allow`, :meth:`deny` (the program catches it) or
    :meth:`pause` (the run ends with a checkpoint; needs a runtime with a ``checkpoint_key``)."""

    kind: Literal["allow", "deny", "pause"]
    reason: Optional[str] = None

    @classmethod
    def allow(cls) -> "Decision":
        return cls("allow")

    @classmethod
    def deny(cls, reason: str) -> "Decision":
        return cls("deny", reason)

    @classmethod
    def pause(cls) -> "Decision":
        return cls("pause")


#: An approver may answer with a :class:`Decision`, or ``True`` (allow) / ``False`` (deny).
DecisionLike = Union[Decision, bool]
Approver = Callable[[ApprovalRequest], Union[DecisionLike, Awaitable[DecisionLike]]]
EventHandler = Callable[[Dict[str, Any]], Any]


def cell_executable() -> Optional[str]:
    """The ``code-runtime`` executable installed with this package, which serves V8 cells.

    ``CODE_RUNTIME_EXECUTABLE`` overrides it; otherwise it is found in the distribution's own
    record of installed files, so it is this package's even when another is first on ``PATH``.
    """
    override = os.environ.get("CODE_RUNTIME_EXECUTABLE")
    if override:
        return override
    try:
        from importlib import metadata

        distribution = metadata.distribution("code-runtime")
        for file in distribution.files or ():
            if file.name == "code-runtime" and file.parent.name in ("bin", "scripts"):
                path = str(distribution.locate_file(file))
                if os.access(path, os.X_OK):
                    return os.path.realpath(path)
    except Exception:  # not installed as a distribution (a source checkout)
        pass
    return None


_installed_command = cell_executable

_open_runtimes: "weakref.WeakSet[Runtime]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for runtime in list(_open_runtimes):
        runtime.close_now()
    _native.shutdown()


class Runtime:
    """Runs programs in one language, each in a fresh sandbox (or isolate), against namespaces.

    >>> async with Runtime("python") as rt:
    ...     result = await rt.run("return 1 + 1")
    ...     assert result.value == 2

    Starting it costs what the provider's start costs (V8 initialised once, a Python interpreter
    probed once): make one at startup and share it; it is safe from several threads and event
    loops. Invalid options raise :class:`ContractError`; a sandbox this machine cannot give raises
    ``RuntimeError``.
    """

    def __init__(
        self,
        language: Language = "python",
        *,
        isolation: Optional[Isolation] = None,
        limits: LimitsLike = None,
        checkpoint_key: Optional[bytes] = None,
        python: Optional[str] = None,
        preload: Sequence[str] = (),
        cell_executable: Optional[str] = None,
        warm: bool = True,
        legacy_decorators: bool = False,
        sessions: Optional[str] = None,
    ) -> None:
        """``isolation``: ``"process"`` (a sandbox cell per run, the default) or, for TypeScript,
        ``"thread"`` (an isolate on a thread of this process: fastest, for trusted programs).
        ``checkpoint_key`` (16+ bytes) lets runs pause for approval and signs their checkpoints.
        ``python`` names the interpreter Python runs use (default ``python3`` on ``PATH``); a
        virtual environment's brings its packages (its ``site-packages``, read-only in the cell).
        ``preload`` names modules every Python run starts with imported (``["pandas"]``): imported
        once, in the zygote each run forks from. ``warm`` keeps a sandbox started ahead of the
        next run. ``legacy_decorators`` (TypeScript) compiles decorators as TypeScript's
        ``experimentalDecorators`` does rather than as TC39's decorators, for programs written
        for that convention. ``sessions`` names a directory where :meth:`session`'s state is kept,
        as files signed with ``checkpoint_key`` (or a key of the directory's own), which other
        runtimes and processes naming it share; by default sessions live in this runtime's
        memory."""
        if language not in ("python", "typescript"):
            raise ContractError(f'language must be "python" or "typescript", not {language!r}')
        executable = cell_executable
        if language == "typescript" and isolation != "thread" and executable is None:
            executable = _installed_command()
        self._native = _native.NativeRuntime(
            language,
            isolation=isolation,
            limits=_limits(limits),
            cell_executable=executable,
            interpreter=python,
            preload=list(preload),
            warm=warm,
            checkpoint_key=checkpoint_key,
            legacy_decorators=legacy_decorators,
            sessions=sessions,
        )
        self._closed = False
        self._runs: "weakref.WeakSet[_Run]" = weakref.WeakSet()
        _open_runtimes.add(self)

    @property
    def language(self) -> Language:
        return self._native.language  # type: ignore[return-value]

    @property
    def isolation(self) -> str:
        """``"process"`` or ``"worker-thread"``."""
        return self._native.isolation

    @property
    def packages(self) -> List[Tuple[str, str]]:
        """Python: the ``(name, version)`` of each distribution in the interpreter's virtual
        environment (what a program can import beyond the standard library), sorted by name; empty
        for an interpreter that is not a virtual environment's, and for TypeScript."""
        return self._native.packages

    @property
    def limits(self) -> Limits:
        """The budgets of every run."""
        return Limits(**self._native.limits)

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> "Runtime":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close_now()

    async def close(self) -> None:
        """Disposes the runtime: runs still going end as ``abort``, later runs raise
        :class:`ContractError`. Idempotent."""
        self._closed = True
        for run in list(self._runs):
            run.abandon_unless_polled(blocking=False)
        loop = asyncio.get_running_loop()
        finished = loop.create_future()

        def done() -> None:
            try:
                loop.call_soon_threadsafe(_settle, finished, None)
            except RuntimeError:  # the loop closed meanwhile
                pass

        self._native.close(done)
        await finished

    def close_now(self) -> None:
        """:meth:`close`, waiting in this thread. Runs on event loops that will not poll them
        again (closed, stopped, or this thread's own) are dropped rather than waited for."""
        self._closed = True
        for run in list(self._runs):
            run.abandon_unless_polled(blocking=True)
        self._native.close_blocking()

    def session(self, name: str, *, owner: str = "") -> Session:
        """The session ``name``: runs in it start fresh, each in its own sandbox, with the
        top-level variables, functions, classes and imports its previous run left restored.

        >>> async with rt.session("analysis") as s:       # doctest: +SKIP
        ...     await s.run("import statistics\nrows = [3, 1, 2]")
        ...     result = await s.run("return statistics.mean(rows)")

        ``owner`` keeps the sessions of different users (say) apart under the same name."""
        return Session(self, name, owner)

    def describe(self, namespaces: Sequence[Namespace]) -> str:
        """What the model should read about ``namespaces`` in this runtime's language."""
        return describe(namespaces, self.language)

    async def run(
        self,
        code: str,
        *,
        namespaces: Sequence[Namespace] = (),
        values: Optional[Mapping[str, Any]] = None,
        limits: LimitsLike = None,
        call_tool: bool = False,
        on_event: Optional[EventHandler] = None,
        approver: Optional[Approver] = None,
        approval_timeout: Optional[float] = None,
        truncate: Optional[int] = None,
        session: Optional[Tuple[str, str]] = None,
    ) -> RunResult:
        """Runs ``code`` (the body of an async function: top-level ``await`` and ``return``).

        ``values`` are read-only globals of the program; ``limits`` tighten the runtime's for this
        run; ``call_tool`` gives the program ``call_tool(name, args)``. ``on_event`` gets each
        event as a dict (``{"type": "log" | "call" | "settled" | "approval_requested" |
        "approval_decided" | "end", ...}``) on this event loop. ``approver`` decides the calls
        that need approval; ``approval_timeout`` (seconds, default 600) then denies.
        ``truncate`` (bytes; about 4 a token) shrinks a larger result to fit: its largest strings
        and lists cut first, same shape, marked, and :attr:`RunResult.truncated` says so (the
        ``max_output_bytes`` limit still stops a run that outgrows it).

        ``session`` (``(name, owner)``; :meth:`session` is the friendlier way) runs it in that
        session.

        Everything the program does is in the result; only misuse of the contract raises
        (:class:`ContractError`). Cancelling the awaiting task stops the program.
        """
        return await self._start(
            code,
            namespaces,
            values,
            limits,
            call_tool,
            on_event,
            approver,
            approval_timeout,
            None,
            truncate,
            session,
        )

    async def resume(
        self,
        checkpoint: bytes,
        decisions: Mapping[int, Union[bool, str, Decision]],
        *,
        namespaces: Sequence[Namespace] = (),
        values: Optional[Mapping[str, Any]] = None,
        limits: LimitsLike = None,
        call_tool: bool = False,
        on_event: Optional[EventHandler] = None,
        approver: Optional[Approver] = None,
        approval_timeout: Optional[float] = None,
        session: Optional[Tuple[str, str]] = None,
    ) -> RunResult:
        """Continues a paused run exactly: its program runs again, its recorded calls are answered
        from the checkpoint, ``decisions`` (``{call: True | False | "reason" | Decision}``) apply
        to its pending calls, and it goes on live. Give it the same namespaces and values; the
        checkpoint must verify under this runtime's ``checkpoint_key``. A run that paused in a
        session resumes in it (:meth:`Session.resume` for a session with an owner), from the state
        it began with."""
        decided: Dict[int, Optional[str]] = {}
        for call, decision in decisions.items():
            if isinstance(decision, Decision):
                if decision.kind == "pause":
                    raise ContractError("a resume decides pending calls: allow or deny")
                decision = True if decision.kind == "allow" else (decision.reason or "denied")
            if decision is True:
                decided[int(call)] = None
            elif decision is False:
                decided[int(call)] = "denied"
            elif isinstance(decision, str):
                decided[int(call)] = decision
            else:
                raise ContractError("a decision is True, False, a reason or a Decision")
        return await self._start(
            "",
            namespaces,
            values,
            limits,
            call_tool,
            on_event,
            approver,
            approval_timeout,
            (bytes(checkpoint), decided),
            None,
            session,
        )

    async def _start(
        self,
        code: str,
        namespaces: Sequence[Namespace],
        values: Optional[Mapping[str, Any]],
        limits: LimitsLike,
        call_tool: bool,
        on_event: Optional[EventHandler],
        approver: Optional[Approver],
        approval_timeout: Optional[float],
        resume: Optional[Tuple[bytes, Dict[int, Optional[str]]]],
        truncate: Optional[int],
        session: Optional[Tuple[str, str]] = None,
    ) -> RunResult:
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        if truncate is not None and (
            isinstance(truncate, bool) or not isinstance(truncate, int) or truncate < 0
        ):
            raise ContractError(f"truncate is a number of bytes, not {truncate!r}")
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        finished: asyncio.Future[Tuple[Any, ...]] = loop.create_future()

        def done(outcome: Tuple[Any, ...]) -> None:
            try:
                on_loop(loop, _settle, finished, outcome)
            except RuntimeError:  # the loop closed: nobody waits for this run
                pass

        run = _Run(loop, finished)
        bound = [(ns._native, ns._dispatcher(loop, context, run.poll_now)) for ns in namespaces]
        driver = self._native.run(
            code,
            bound,
            done,
            values=values,
            limits=_limits(limits),
            call_tool=call_tool,
            on_event=_event_trampoline(loop, context, on_event) if on_event else None,
            approver=_approver_trampoline(loop, context, approver) if approver else None,
            approval_timeout_ms=(
                None if approval_timeout is None else max(0, int(approval_timeout * 1000))
            ),
            resume=resume,
            truncate=truncate,
            session=session,
        )
        # The run is polled on this loop: whenever its eventfd rings, once now, and by each
        # binding call that answers it.
        run.driver = driver
        self._runs.add(run)
        loop.add_reader(driver.fd, run.poll)
        try:
            run.poll()
        except BaseException as error:
            loop.remove_reader(driver.fd)
            driver.abandon()
            # The poll's own failure, as the awaiting caller would have got it from `finished`.
            failure = finished.exception() if finished.done() else None
            if failure is not None and not isinstance(error, (SystemExit, KeyboardInterrupt)):
                raise failure from error
            raise
        try:
            outcome = await asyncio.shield(finished)
        except asyncio.CancelledError:
            driver.cancel()  # it ends as `abort` at its next poll, on this loop
            raise
        return _result(outcome)


class _Run:
    """A run in flight on ``loop``, polled from the loop's reader callback."""

    __slots__ = ("driver", "loop", "finished", "__weakref__")

    driver: _native.RunDriver  # set once the run has started

    def __init__(
        self, loop: asyncio.AbstractEventLoop, finished: "asyncio.Future[Tuple[Any, ...]]"
    ) -> None:
        self.loop = loop
        self.finished = finished

    def poll(self) -> None:
        try:
            ended = self.driver.poll()
        except BaseException as error:
            self._drop(error)
            raise
        if ended:
            self.loop.remove_reader(self.driver.fd)

    def poll_now(self) -> None:
        """Polls the run from the task of a binding call that has just answered it, unless it
        is being polled (the answer came inside that poll). A failure goes where the reader's
        would: to the loop's exception handler, not into the binding's task."""
        try:
            ended = self.driver.poll_now()
        except (SystemExit, KeyboardInterrupt) as error:
            self._drop(error)
            raise
        except BaseException as error:
            self._drop(error)
            self.loop.call_exception_handler(
                {"message": "code_runtime: polling a run failed", "exception": error}
            )
            return
        if ended:
            self.loop.remove_reader(self.driver.fd)

    def _drop(self, error: BaseException) -> None:
        """After a poll that failed: the run is dropped, and whoever awaits it gets the failure
        (its outcome will never come), not a wait without end."""
        self.loop.remove_reader(self.driver.fd)
        self.driver.abandon()
        if not self.finished.done():
            failure = RuntimeError(f"code_runtime: polling the run failed: {error!r}")
            failure.__cause__ = error
            self.finished.set_exception(failure)

    def abandon_unless_polled(self, blocking: bool) -> None:
        """Before a close: a run whose loop will not poll it again (closed, stopped, or, for a
        blocking close, this thread's own loop, which the close blocks) is dropped, so disposal
        does not wait for it forever."""
        if self.driver.finished:
            return
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if (
            self.loop.is_closed()
            or not self.loop.is_running()
            or (blocking and self.loop is current)
        ):
            self.driver.abandon()


def _settle(future: "asyncio.Future[Any]", value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _result(outcome: Tuple[Any, ...]) -> RunResult:
    if outcome[0] == "contract":
        raise ContractError(outcome[1])
    _, logs, value, error, paused, truncated, session = outcome
    checkpoint, pending = (None, []) if paused is None else paused
    return RunResult(
        logs=logs,
        value=value,
        error=None if error is None else RunError(error[0], error[1]),
        checkpoint=checkpoint,
        pending=[PendingCall(**call) for call in pending],
        truncated=None if truncated is None else Truncated(truncated[0], truncated[1]),
        session=None if session is None else session_report(session),
    )


def _event_trampoline(
    loop: asyncio.AbstractEventLoop, context: contextvars.Context, on_event: EventHandler
) -> Callable[[Dict[str, Any]], None]:
    def deliver(event: Dict[str, Any]) -> None:
        try:
            on_loop(loop, _call_handler, on_event, event, context=context)
        except RuntimeError:  # the loop closed
            pass

    return deliver


def _call_handler(on_event: EventHandler, event: Dict[str, Any]) -> None:
    outcome = on_event(event)
    if inspect.isawaitable(outcome):
        asyncio.ensure_future(outcome)


def _approver_trampoline(
    loop: asyncio.AbstractEventLoop, context: contextvars.Context, approver: Approver
) -> Callable[[Dict[str, Any], _native.DecisionReply], None]:
    async def decide(request: Dict[str, Any], reply: _native.DecisionReply) -> None:
        try:
            decision = approver(ApprovalRequest(**request))
            if inspect.isawaitable(decision):
                decision = await decision
        except Exception as error:  # an approver that fails denies
            reply.decide("deny", f"the approver failed: {type(error).__name__}: {error}")
            return
        if decision is True:
            reply.decide("allow")
        elif decision is False:
            reply.decide("deny", "denied by the approver")
        elif isinstance(decision, Decision):
            reply.decide(decision.kind, decision.reason)
        else:
            reply.decide(
                "deny",
                f"the approver answered {type(decision).__name__}, not a Decision or a bool",
            )

    def ask(request: Dict[str, Any], reply: _native.DecisionReply) -> None:
        def start() -> None:
            context.copy().run(loop.create_task, decide(request, reply))

        try:
            on_loop(loop, start)
        except RuntimeError:  # the loop closed
            reply.decide("deny", "the event loop of the run is closed")

    return ask


def describe(namespaces: Sequence[Namespace], language: Language) -> str:
    """What the model should read about ``namespaces`` in ``language``: TypeScript declarations
    or Python stubs, with each function's description and schemas."""
    return _native.describe([ns._native for ns in namespaces], language)

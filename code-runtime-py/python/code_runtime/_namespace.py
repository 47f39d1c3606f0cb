"""Namespaces of Python functions a program calls, and how each call reaches its function."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import sys
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Coroutine,
    Dict,
    Mapping,
    Optional,
    TypeVar,
    Union,
    overload,
)

from . import _native, _schema

F = TypeVar("F", bound=Callable[..., Any])

#: ``True`` (every call needs approval), ``False``/``None`` (none), or
#: ``{"when": <JSON Schema>}`` (the calls whose argument matches it).
Approval = Union[bool, None, Mapping[str, Any]]


class BindingError(Exception):
    """Raise it from a function to reject the program's call with ``message`` and ``data``.

    The program catches the namespace's error class with this message, and ``data`` (any JSON
    value) as its ``data``. Any other exception rejects the call too, as
    ``"<ExceptionType>: <message>"``, with the exception's ``data`` attribute if it has one.
    """

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


@dataclass(frozen=True)
class _Function:
    function: Callable[..., Any]
    signature: _schema.Signature
    is_async: bool


class Namespace:
    """A global object of the program (``tools``) whose methods are Python functions.

    >>> tools = Namespace("tools", error_class="ToolError")
    >>> @tools.function
    ... async def search(query: str, limit: int = 10) -> list[str]:
    ...     '''Searches the index.'''
    ...     return [query] * limit

    The program calls ``await tools.search({"query": "x"})`` (TypeScript) or
    ``await tools.search(query="x")`` (Python). A name that is not a usable identifier, or one that
    would shadow what programs need, raises ``ContractError`` here.
    """

    def __init__(
        self,
        name: str,
        *,
        description: Optional[str] = None,
        error_class: Optional[str] = None,
        member_property: str = "tool",
        functions_as_globals: bool = False,
    ) -> None:
        self._native = _native.NativeNamespace(
            name,
            description=description,
            error_class=error_class,
            member_property=member_property,
            functions_as_globals=functions_as_globals,
        )
        self._functions: Dict[str, _Function] = {}

    @property
    def name(self) -> str:
        """The program's global name of the namespace."""
        return self._native.name

    @property
    def functions(self) -> list[str]:
        """The names of its functions, in order."""
        return self._native.functions

    @overload
    def function(self, function: F) -> F: ...

    @overload
    def function(
        self,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        input_schema: Optional[Dict[str, Any]] = None,
        output_schema: Optional[Dict[str, Any]] = None,
        approval: Approval = None,
        validate_input: bool = False,
    ) -> Callable[[F], F]: ...

    def function(
        self,
        function: Optional[F] = None,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        input_schema: Optional[Dict[str, Any]] = None,
        output_schema: Optional[Dict[str, Any]] = None,
        approval: Approval = None,
        validate_input: bool = False,
    ) -> Union[F, Callable[[F], F]]:
        """Adds a function, as a decorator (bare or with options); returns it unchanged.

        Its description is its docstring; its input schema comes from its parameters' hints (or a
        single pydantic model parameter), its output schema from its return hint, unless given.
        ``approval`` marks calls that wait for the run's approver. ``validate_input`` checks each
        argument against the input schema before the function runs.
        """

        def add(function: F) -> F:
            self.add(
                function,
                name=name,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                approval=approval,
                validate_input=validate_input,
            )
            return function

        return add(function) if function is not None else add

    def add(
        self,
        function: Callable[..., Any],
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        input_schema: Optional[Dict[str, Any]] = None,
        output_schema: Optional[Dict[str, Any]] = None,
        approval: Approval = None,
        validate_input: bool = False,
    ) -> None:
        """Adds (or replaces) ``function`` under ``name`` (its ``__name__`` by default)."""
        if not callable(function):
            raise TypeError(f"a namespace function must be callable, not {type(function).__name__}")
        name = name if name is not None else getattr(function, "__name__", None)
        if not isinstance(name, str):
            raise _native.ContractError("the function has no name: pass name=")
        signature = _schema.signature_of(function, input_schema, output_schema)
        if description is None:
            description = inspect.getdoc(function) or None
        self._native.add(
            name,
            description=description,
            input_schema=signature.input_schema,
            output_schema=signature.output_schema,
            approval=approval,
            validate_input=validate_input,
        )
        self._functions[name] = _Function(
            function, signature, _is_async(function)
        )

    def _dispatcher(
        self,
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context,
        answered: Callable[[], None],
    ) -> _native.Invoke:
        """The run's ``invoke(function, argument, reply)``: starts each call as a task on
        ``loop``, in a copy of the context the run was started in; a call that has answered
        calls ``answered()`` (which polls the run) from its task."""
        functions = dict(self._functions)
        label = self.name

        def invoke(
            function: str, argument: Any, reply: _native.CallReply
        ) -> Optional[Callable[[], None]]:
            entry = functions.get(function)
            if entry is None:  # the namespace changed between the declaration and this run
                reply.reject(f"{label}.{function} is not a function of this run")
                return None
            call = _Call(entry, argument, reply, loop, context, answered)
            if _running_loop() is loop:
                # Runs are polled on their loop, so this is the common case: the call starts
                # now, inside the poll.
                call.begin()
            else:
                try:
                    on_loop(loop, call.start)
                except RuntimeError:
                    reply.reject(f"{label}.{function}: the event loop of the run is closed")
                    return None
            return call.cancel

        return invoke


def on_loop(
    loop: asyncio.AbstractEventLoop,
    callback: Callable[..., Any],
    *args: Any,
    context: Optional[contextvars.Context] = None,
) -> None:
    """Calls ``callback(*args)`` on ``loop``: at once when this is the loop's thread (a run's
    callbacks come from its poll, there), else scheduled thread-safely. ``RuntimeError`` when the
    loop is closed."""
    if loop.is_closed():
        raise RuntimeError("the event loop is closed")
    if _running_loop() is loop:
        if context is None:
            callback(*args)
        else:
            context.run(callback, *args)
    else:
        loop.call_soon_threadsafe(callback, *args, context=context)


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _is_async(function: Callable[..., Any]) -> bool:
    while isinstance(function, functools.partial):
        function = function.func
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)
    )


class _Call:
    """One call of a Python function, on the run's event loop."""

    __slots__ = ("entry", "argument", "reply", "loop", "context", "answered", "task", "cancelled")

    def __init__(
        self,
        entry: _Function,
        argument: Any,
        reply: _native.CallReply,
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context,
        answered: Callable[[], None],
    ) -> None:
        self.entry = entry
        self.argument = argument
        self.reply = reply
        self.loop = loop
        self.context = context
        self.answered = answered
        self.task: Optional[asyncio.Future[Any]] = None
        self.cancelled = False

    def start(self) -> None:
        """On the loop's thread, some time after the call came: unless it no longer waits."""
        if not (self.cancelled or self.reply.done):
            self.begin()

    def begin(self) -> None:
        """On the loop's thread."""
        # Each call gets its own copy of the run's context, as asyncio gives each task one.
        self.task = _eager_task(self.loop, self._run(), self.context.copy())

    async def _run(self) -> None:
        try:
            kwargs = _schema.arguments(self.entry.signature, self.argument)
            if self.entry.is_async:
                value = await self.entry.function(**kwargs)
            else:
                # A plain function may block: it runs on the loop's executor, not the loop.
                call = functools.partial(self.entry.function, **kwargs)
                value = await self.loop.run_in_executor(None, contextvars.copy_context().run, call)
                if inspect.isawaitable(value):
                    value = await value
        except asyncio.CancelledError:
            self.reply.reject("the call was cancelled")
            raise
        except BindingError as error:
            taken = self.reply.reject(error.message, error.data)
        except _schema.ArgumentError as error:
            taken = self.reply.reject(f"TypeError: {error}")
        except Exception as error:  # the program sees every failure of the function
            message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            taken = self.reply.reject(message, getattr(error, "data", None))
        else:
            taken = self.reply.resolve(value)
        if taken:
            # The run takes the answer in this step rather than at the loop's next turn (or,
            # when this step runs inside the run's poll, that poll takes it).
            self.answered()

    def cancel(self) -> None:
        """From any thread (the run's end may drop the call on the reactor's)."""
        try:
            on_loop(self.loop, self._cancel)
        except RuntimeError:  # the loop is closed: nothing runs to stop
            pass

    def _cancel(self) -> None:
        self.cancelled = True
        if self.task is not None:
            self.task.cancel()


# `_eager_task(loop, coroutine, context)`: a task for `coroutine` in `context` whose first step
# runs now. A binding that answers without waiting answers inside the run's poll, which hands
# the answer to the program with no turn of the loop in between (a turn is most of a round
# trip's cost in Python). Still a real task: `current_task()`, `asyncio.timeout` and
# cancellation work in every step.

if sys.version_info >= (3, 12):

    def _eager_task(
        loop: asyncio.AbstractEventLoop,
        coroutine: Coroutine[Any, Any, None],
        context: contextvars.Context,
    ) -> "asyncio.Future[None]":
        return asyncio.Task(coroutine, loop=loop, context=context, eager_start=True)

else:
    # Private, stable since 3.7: what asyncio's tasks call around each of their steps.
    _enter_task = asyncio.tasks._enter_task
    _leave_task = asyncio.tasks._leave_task

    def _eager_task(
        loop: asyncio.AbstractEventLoop,
        coroutine: Coroutine[Any, Any, None],
        context: contextvars.Context,
    ) -> "asyncio.Future[None]":
        # 3.12's eager start, done with the task's own first step: the task schedules it as it
        # is made, and on asyncio's own loops the step is the last handle of the loop's ready
        # queue, taken back and run here as the loop would run it (the task current, in its
        # context). A task of asyncio's own, as 3.12's, whatever the loop's task factory. On
        # other loops (uvloop) the step stays scheduled, for the loop's next turn.
        task: "asyncio.Task[None]"
        if sys.version_info >= (3, 11):
            task = asyncio.Task(coroutine, loop=loop, context=context)
        else:  # a task takes a copy of the context it is made in
            task = context.run(asyncio.Task, coroutine, loop=loop)
        ready = getattr(loop, "_ready", None) if isinstance(loop, asyncio.BaseEventLoop) else None
        if not ready or not _steps(ready[-1], task):
            return task
        step = ready.pop()
        outer = asyncio.current_task(loop)  # a binding call's task that polls the run, or none
        if outer is not None:
            _leave_task(loop, outer)
        try:
            step._run()
        finally:
            if outer is not None:
                _enter_task(loop, outer)
        return task

    def _steps(handle: asyncio.Handle, task: "asyncio.Task[None]") -> bool:
        """Whether ``handle`` is ``task``'s scheduled step."""
        return getattr(handle._callback, "__self__", None) is task  # type: ignore[attr-defined]

"""A sandbox provider for FastMCP's code mode: full CPython (or TypeScript) in a real sandbox.

>>> from fastmcp import FastMCP
>>> from fastmcp.experimental.transforms.code_mode import CodeMode
>>> import code_runtime.fastmcp
>>> mcp = FastMCP("demo")
>>> mcp.add_transform(CodeMode(sandbox_provider=code_runtime.fastmcp.SandboxProvider()))

Each ``execute`` runs the model's program in a fresh sandbox cell. FastMCP's external functions
(``call_tool(tool_name, params)``) are bare async globals of the program, its ``inputs`` are
read-only globals, and the program's ``return`` value is the tool's result. A program that fails
raises FastMCP's ``ToolError`` with the failure and what it printed, so the model reads why.

Within one FastMCP session (``ctx.session_id``: a client's, on a handshake-era connection), what a
Python program leaves (its top-level variables, functions, classes and imports) carries to the
next ``execute`` as data: the run still starts in a fresh cell, with them restored
(``sessions=False`` turns that off). Another session never sees them. On a 2026-07-28 connection
FastMCP gives every request a session of its own, so nothing carries there.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Dict, Optional

from ._namespace import Namespace
from ._runtime import Isolation, Language, LimitsLike, RunResult, Runtime

__all__ = ["SandboxProvider"]

#: The namespace that holds the external functions; they are bare globals of the program.
NAMESPACE = "external"


class SandboxProvider:
    """FastMCP's ``SandboxProvider`` protocol on code-runtime.

    ``language`` is ``"python"`` (what FastMCP's code mode prompts the model to write) or
    ``"typescript"``. ``limits`` are every run's budgets. ``runtime`` shares an existing
    :class:`~code_runtime.Runtime` instead of starting one on the first run.
    """

    def __init__(
        self,
        *,
        language: Language = "python",
        isolation: Optional[Isolation] = None,
        limits: LimitsLike = None,
        runtime: Optional[Runtime] = None,
        sessions: bool = True,
    ) -> None:
        self.language: Language = runtime.language if runtime is not None else language
        # TypeScript runs carry no sessions (yet).
        self.sessions = sessions and self.language == "python"
        self._options: Dict[str, Any] = {"isolation": isolation, "limits": limits}
        self._runtime = runtime
        self._lock = threading.Lock()

    def runtime(self) -> Runtime:
        """The runtime the runs use, started on first use."""
        with self._lock:
            if self._runtime is None:
                self._runtime = Runtime(self.language, **self._options)
            return self._runtime

    async def run(
        self,
        code: str,
        *,
        inputs: Optional[Dict[str, Any]] = None,
        external_functions: Optional[Dict[str, Callable[..., Any]]] = None,
    ) -> Any:
        """Runs ``code`` and returns what it returned (with its printed lines, if any)."""
        namespace = Namespace(NAMESPACE, functions_as_globals=True)
        for name, function in (external_functions or {}).items():
            namespace.add(function, name=name)
        runtime = self.runtime() if self._runtime is not None else await asyncio.to_thread(self.runtime)
        client = _fastmcp_session() if self.sessions else None
        session = None if client is None else ("execute", client)
        result = await runtime.run(code, namespaces=[namespace], values=inputs or None, session=session)
        return _answer(result)


def _fastmcp_session() -> Optional[str]:
    """The id of the FastMCP session (the client) whose tool call runs now, if any."""
    try:
        from fastmcp.server.dependencies import get_context

        return str(get_context().session_id)
    except Exception:  # no FastMCP, or no request in progress
        return None


def _answer(result: RunResult) -> Any:
    if result.error is not None:
        message = f"the program failed ({result.error.kind}): {result.error.message}"
        if result.logs:
            message += "\nit printed:\n" + "\n".join(result.logs)
        raise _tool_error(message)
    dropped = [] if result.session is None else result.session.dropped
    if dropped:
        # What the model thinks it kept and did not: said beside the result.
        return {
            "result": result.value,
            "logs": result.logs,
            "not_kept": [f"{entry.name}: {entry.why}" for entry in dropped],
        }
    if not result.logs:
        return result.value
    if result.value is None:
        return "\n".join(result.logs)
    return {"result": result.value, "logs": result.logs}


def _tool_error(message: str) -> Exception:
    try:
        from fastmcp.exceptions import ToolError
    except ImportError:  # used without FastMCP: the protocol only asks that a failed run raises
        return RuntimeError(message)
    return ToolError(message)

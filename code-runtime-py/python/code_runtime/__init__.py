"""code-runtime: run a model-written TypeScript or Python program in a sandbox, against your
async functions, and get back only what it printed and returned.

>>> import asyncio
>>> from code_runtime import Namespace, Runtime
>>> tools = Namespace("tools", error_class="ToolError")
>>> @tools.function
... async def add(a: int, b: int) -> int:
...     '''Adds two numbers.'''
...     return a + b
>>> async def main() -> None:
...     async with Runtime("python") as rt:
...         result = await rt.run("return await tools.add(a=1, b=2)", namespaces=[tools])
...         print(result.value)
>>> asyncio.run(main())
3
"""

from . import _native
from ._namespace import Approval, BindingError, Namespace
from ._session import Dropped, Kept, Session, SessionReport
from ._runtime import (
    ApprovalRequest,
    Approver,
    ContractError,
    Decision,
    FailureKind,
    Isolation,
    Language,
    Limits,
    PendingCall,
    RunError,
    RunResult,
    Runtime,
    Truncated,
    cell_executable,
    describe,
)

ContractError.__module__ = "code_runtime"

try:
    from importlib.metadata import version as _version

    __version__ = _version("code-runtime")
except Exception:  # a source checkout
    __version__ = "0.0.0"

__all__ = [
    "Approval",
    "ApprovalRequest",
    "Approver",
    "BindingError",
    "ContractError",
    "Decision",
    "FailureKind",
    "Isolation",
    "Language",
    "Limits",
    "Namespace",
    "PendingCall",
    "RunError",
    "RunResult",
    "Runtime",
    "Session",
    "SessionReport",
    "Kept",
    "Dropped",
    "Truncated",
    "cell_executable",
    "describe",
]
del _native

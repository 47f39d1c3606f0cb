"""Sessions: runs that carry their variables and definitions to the next run, as data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Optional

if TYPE_CHECKING:
    from ._runtime import Runtime, RunResult

Restored = Literal["new", "continued", "expired"]


@dataclass(frozen=True)
class Kept:
    """A name that carries to the session's next run: a value, or a definition (``type`` is
    ``"function"``, ``"class"`` or ``"import"``)."""

    name: str
    type: str
    bytes: int


@dataclass(frozen=True)
class Dropped:
    """A name the run left that does not carry, and why (an open file, say)."""

    name: str
    why: str


@dataclass(frozen=True)
class SessionReport:
    """What a run's result says of its session."""

    name: str
    #: Which run of the session this was, from 1.
    run: int
    #: The state the run began with: ``"new"``, ``"continued"``, or ``"expired"`` (the session
    #: was idle past its time, or evicted, and this run starts it afresh).
    restored: Restored
    kept: List[Kept]
    dropped: List[Dropped]
    #: The session's size, as ``max_session_bytes`` counts it.
    bytes: int
    expires_in_ms: int
    #: Why the session kept the state the run began with, when it did.
    unchanged: Optional[str] = None


def session_report(fields: Dict[str, Any]) -> SessionReport:
    return SessionReport(
        name=fields["name"],
        run=fields["run"],
        restored=fields["restored"],
        kept=[Kept(**kept) for kept in fields["kept"]],
        dropped=[Dropped(**dropped) for dropped in fields["dropped"]],
        bytes=fields["bytes"],
        expires_in_ms=fields["expires_in_ms"],
        unchanged=fields["unchanged"],
    )


class Session:
    """A named session of a :class:`~code_runtime.Runtime` (:meth:`Runtime.session`).

    Usable as ``async with rt.session("name") as s`` or directly; :meth:`run` takes
    :meth:`Runtime.run`'s arguments. One run at a time per session: a second waits for its turn,
    within its own wall clock.
    """

    def __init__(self, runtime: "Runtime", name: str, owner: str = "") -> None:
        if not isinstance(name, str) or not isinstance(owner, str):
            raise TypeError("a session's name and owner are str")
        self.runtime = runtime
        self.name = name
        self.owner = owner

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def run(self, code: str, **options: Any) -> "RunResult":
        """Runs ``code`` in this session (see :meth:`Runtime.run`)."""
        return await self.runtime.run(code, session=(self.name, self.owner), **options)

    async def resume(self, checkpoint: bytes, decisions: Any, **options: Any) -> "RunResult":
        """Continues a run of this session that paused (see :meth:`Runtime.resume`), from the
        state it began with: a session that has changed since is a ``ContractError``."""
        return await self.runtime.resume(checkpoint, decisions, session=(self.name, self.owner), **options)

    def __repr__(self) -> str:
        return f"Session({self.name!r})"

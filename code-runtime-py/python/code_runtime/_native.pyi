# Stubs of the extension module (src/*.rs). Private: import from `code_runtime`.
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

class ContractError(ValueError): ...

class CallReply:
    def resolve(self, value: object) -> bool: ...
    def reject(self, message: str, data: object = None) -> bool: ...
    @property
    def done(self) -> bool: ...

class DecisionReply:
    def decide(self, decision: str, reason: Optional[str] = None) -> bool: ...
    @property
    def done(self) -> bool: ...

class NativeNamespace:
    def __init__(
        self,
        name: str,
        *,
        description: Optional[str] = None,
        error_class: Optional[str] = None,
        member_property: str = "tool",
        functions_as_globals: bool = False,
    ) -> None: ...
    def add(
        self,
        name: str,
        *,
        description: Optional[str] = None,
        input_schema: object = None,
        output_schema: object = None,
        approval: object = None,
        validate_input: bool = False,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def functions(self) -> list[str]: ...

class RunDriver:
    @property
    def fd(self) -> int: ...
    def poll(self) -> bool: ...
    def poll_now(self) -> Optional[bool]: ...
    def cancel(self) -> None: ...
    def abandon(self) -> None: ...
    @property
    def finished(self) -> bool: ...

Invoke = Callable[[str, Any, CallReply], Optional[Callable[[], None]]]

class NativeRuntime:
    def __init__(
        self,
        language: str,
        *,
        isolation: Optional[str] = None,
        limits: Optional[Mapping[str, Optional[int]]] = None,
        cell_executable: Optional[str] = None,
        interpreter: Optional[str] = None,
        preload: Sequence[str] = (),
        warm: bool = True,
        checkpoint_key: Optional[bytes] = None,
        legacy_decorators: bool = False,
        sessions: Optional[str] = None,
    ) -> None: ...
    @property
    def packages(self) -> list[Tuple[str, str]]: ...
    @property
    def language(self) -> str: ...
    @property
    def isolation(self) -> str: ...
    @property
    def limits(self) -> dict[str, int]: ...
    def run(
        self,
        code: str,
        namespaces: Sequence[Tuple[NativeNamespace, Invoke]],
        done: Callable[[Tuple[Any, ...]], None],
        *,
        values: Optional[Mapping[str, object]] = None,
        limits: Optional[Mapping[str, Optional[int]]] = None,
        call_tool: bool = False,
        on_event: Optional[Callable[[dict[str, Any]], None]] = None,
        approver: Optional[Callable[[dict[str, Any], DecisionReply], None]] = None,
        approval_timeout_ms: Optional[int] = None,
        resume: Optional[Tuple[bytes, Mapping[int, Optional[str]]]] = None,
        truncate: Optional[int] = None,
        session: Optional[Tuple[str, str]] = None,
    ) -> RunDriver: ...
    def close(self, done: Callable[[], None]) -> None: ...
    def close_blocking(self) -> None: ...
    def rust_host_seconds(self, program: str) -> float: ...

def describe(namespaces: Sequence[NativeNamespace], language: str) -> str: ...
def shutdown() -> None: ...
def budgets() -> List[Tuple[str, int]]: ...

"""Sessions through the package: `rt.session(name)`, `Runtime(sessions=DIR)`, and what a result
says of its session."""

import asyncio
import os
import pathlib
from typing import Any

import pytest

from code_runtime import ContractError, Runtime, SessionReport


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_session_carries_values_functions_classes_and_imports(python_rt: Runtime) -> None:
    async def main() -> None:
        async with python_rt.session("pkg-carry") as s:
            first = await s.run(
                "import statistics\nrows = [3, 1, 2]\ndef clean(d):\n    return sorted(d)\n"
                "class Box:\n    def __init__(self, v):\n        self.v = v\nbox = Box(7)\n"
                "fh = open('/dev/null')"
            )
            assert first.ok, first.error
            report = first.session
            assert isinstance(report, SessionReport)
            assert (report.name, report.run, report.restored) == ("pkg-carry", 1, "new")
            kept = {(k.name, k.type) for k in report.kept}
            assert {("statistics", "import"), ("clean", "function"), ("Box", "class"), ("rows", "list"), ("box", "Box")} <= kept
            assert [d.name for d in report.dropped] == ["fh"]
            assert "open file" in report.dropped[0].why
            second = await s.run("return [clean(rows), statistics.mean(rows), box.v]")
            assert second.value == [[1, 2, 3], 2, 7]
            assert (second.session.run, second.session.restored) == (2, "continued")
        plain = await python_rt.run("return 'rows' in globals()")
        assert plain.value is False and plain.session is None

    run(main())


def test_owners_and_names_keep_sessions_apart(python_rt: Runtime) -> None:
    async def main() -> None:
        await python_rt.session("pkg-apart", owner="alice").run("secret = 1")
        for session in (python_rt.session("pkg-apart", owner="bob"), python_rt.session("pkg-other", owner="alice")):
            result = await session.run("return 'secret' in globals()")
            assert result.value is False and result.session.restored == "new"

    run(main())


def test_a_directory_of_sessions_is_shared_by_runtimes(tmp_path: pathlib.Path) -> None:
    async def main() -> None:
        key = os.urandom(32)
        with Runtime("python", sessions=str(tmp_path), checkpoint_key=key) as one:
            assert (await one.session("shared").run("total = 40")).ok
        with Runtime("python", sessions=str(tmp_path), checkpoint_key=key) as two:
            result = await two.session("shared").run("return total + 2")
            assert result.value == 42 and result.session.run == 2
        with Runtime("python", sessions=str(tmp_path), checkpoint_key=os.urandom(32)) as forger:
            refused = await forger.session("shared").run("return 1")
            assert refused.error is not None and "signature" in refused.error.message
        assert oct(tmp_path.stat().st_mode & 0o777) == "0o700"

    run(main())


def test_session_limits_and_expiry(python_rt: Runtime) -> None:
    async def main() -> None:
        s = python_rt.session("pkg-idle")
        first = await s.run("x = 1", limits={"session_idle_ms": 200})
        assert first.session.expires_in_ms == 200
        await asyncio.sleep(0.5)
        again = await s.run("return 'x' in globals()")
        assert again.value is False and again.session.restored == "expired"
        over = await s.run("big = b'x' * 100_000", limits={"max_session_bytes": 10_000})
        assert over.ok and over.session.unchanged is not None
        assert any(d.name == "big" and "maxSessionBytes" in d.why for d in over.session.dropped)
        assert python_rt.limits.max_session_bytes == 64 * 2**20

    run(main())


def test_typescript_sessions_are_refused_clearly(ts_rt: Runtime) -> None:
    with pytest.raises(ContractError, match="carry no sessions"):
        run(ts_rt.session("s").run("return 1"))
    with pytest.raises(ContractError, match="unusable"):
        run(ts_rt.session("").run("return 1"))

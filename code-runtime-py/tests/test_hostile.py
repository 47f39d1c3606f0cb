"""The hostile basics, from Python: a program reaches nothing of the host, and no value of any
depth or shape crashes the Python host."""

import asyncio
import os
import pathlib
from typing import Any, List

from code_runtime import Namespace, Runtime


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def depth(value: Any) -> int:
    levels = 0
    while isinstance(value, list) and value:
        value = value[0]
        levels += 1
    return levels


def test_a_program_cannot_read_the_hosts_files_or_environment(
    python_rt: Runtime, ts_rt: Runtime, tmp_path: pathlib.Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    os.environ["CODE_RUNTIME_TEST_SECRET"] = "hunter3"
    try:
        code = f"""
import os
found = []
try:
    found.append(open({str(secret)!r}).read())
except OSError as e:
    found.append(type(e).__name__)
found.append(os.environ.get('CODE_RUNTIME_TEST_SECRET'))
found.append(os.path.exists(os.path.expanduser('~/.ssh')))
return found
"""
        result = run(python_rt.run(code))
        assert result.error is None, result.error
        assert "hunter2" not in result.value and "hunter3" not in result.value
        # TypeScript has no file or environment API at all.
        result = run(ts_rt.run("return [typeof process, typeof require, typeof Deno];"))
        assert result.value == ["undefined", "undefined", "undefined"]
    finally:
        del os.environ["CODE_RUNTIME_TEST_SECRET"]


def test_a_deep_result_does_not_crash_the_host(python_rt: Runtime, ts_thread_rt: Runtime) -> None:
    n = 200_000
    ts = f"let v: any = 1; for (let i = 0; i < {n}; i++) v = [v]; return v;"
    result = run(ts_thread_rt.run(ts))
    assert result.error is None, result.error
    assert depth(result.value) == n
    py = f"v = 1\nfor _ in range({n}):\n    v = [v]\nreturn v"
    result = run(python_rt.run(py))
    # Either the value, or a clear failure: never a crash.
    if result.error is None:
        assert depth(result.value) == n
    del result


def test_a_deep_or_circular_binding_result_does_not_crash_the_host(ts_thread_rt: Runtime) -> None:
    tools = Namespace("tools", error_class="ToolError")

    @tools.function
    async def deep(n: int) -> Any:
        value: Any = 1
        for _ in range(n):
            value = [value]
        return value

    @tools.function
    async def circular() -> Any:
        loop: List[Any] = []
        loop.append(loop)
        return loop

    @tools.function
    async def wide() -> Any:
        # Shared, not copied: 2^40 values once spelled out.
        value: Any = [1]
        for _ in range(40):
            value = [value, value]
        return value

    code = """
const d = await tools.deep({n: 300000});
let depth = 0; let v: any = d; while (Array.isArray(v)) { v = v[0]; depth++; }
const errors: string[] = [];
for (const name of ['circular', 'wide']) {
  try { await (tools as any)[name]({}); } catch (e: any) { errors.push(e.message); }
}
return [depth, errors];
"""
    result = run(ts_thread_rt.run(code, namespaces=[tools]))
    assert result.error is None, result.error
    depth_seen, errors = result.value
    assert depth_seen == 300_000
    assert "circular reference" in errors[0]
    assert "more than" in errors[1]


def test_a_deep_argument_reaches_the_binding(ts_thread_rt: Runtime) -> None:
    tools = Namespace("tools")
    seen: List[int] = []

    @tools.function
    async def measure(value: Any) -> int:
        seen.append(depth(value))
        return seen[-1]

    code = "let v: any = 1; for (let i = 0; i < 100000; i++) v = [v]; return await tools.measure({value: v});"
    result = run(ts_thread_rt.run(code, namespaces=[tools]))
    assert result.error is None, result.error
    assert result.value == 100_000 == seen[0]

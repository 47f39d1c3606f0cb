"""`code_runtime.fastmcp.SandboxProvider` as FastMCP's documentation shows code mode: a real
FastMCP server with CodeMode, and a real FastMCP client calling its `execute` tool."""

import asyncio
import json
from typing import Any

import pytest

fastmcp = pytest.importorskip("fastmcp")

from fastmcp import Client, FastMCP  # noqa: E402
from fastmcp.experimental.transforms.code_mode import CodeMode  # noqa: E402

import code_runtime.fastmcp  # noqa: E402


def server() -> Any:
    mcp = FastMCP("demo")

    @mcp.tool
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    @mcp.tool
    def greet(name: str) -> str:
        """Greets someone."""
        return f"hello {name}"

    mcp.add_transform(CodeMode(sandbox_provider=code_runtime.fastmcp.SandboxProvider()))
    return mcp


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def test_execute_runs_full_cpython_against_the_servers_tools() -> None:
    async def main() -> None:
        async with Client(server()) as client:
            names = {tool.name for tool in await client.list_tools()}
            assert "execute" in names
            result = await client.call_tool(
                "execute",
                {
                    "code": (
                        "import statistics\n"
                        "s = await call_tool('add', {'a': 2, 'b': 3})\n"
                        "g = await call_tool('greet', {'name': 'ada'})\n"
                        "return {'sum': s, 'greeting': g, 'mean': statistics.mean([1, 2, 3])}"
                    )
                },
            )
            assert not result.is_error, text(result)
            value = json.loads(text(result))
            # FastMCP's call_tool gives a tool's structured content: a scalar result wrapped.
            assert value == {"sum": {"result": 5}, "greeting": {"result": "hello ada"}, "mean": 2}

    asyncio.run(main())


def test_a_failing_program_is_a_tool_error_the_model_reads() -> None:
    async def main() -> None:
        async with Client(server()) as client:
            result = await client.call_tool(
                "execute", {"code": "print('before')\nraise ValueError('bad input')"},
                raise_on_error=False,
            )
            assert result.is_error
            message = text(result)
            assert "bad input" in message and "before" in message

    asyncio.run(main())


def test_a_program_that_only_prints_returns_what_it_printed() -> None:
    async def main() -> None:
        async with Client(server()) as client:
            result = await client.call_tool("execute", {"code": "print('just this')"})
            assert "just this" in text(result)

    asyncio.run(main())


def test_the_provider_directly_with_inputs_and_external_functions() -> None:
    provider = code_runtime.fastmcp.SandboxProvider()

    async def lookup(key: str) -> str:
        return key * 2

    async def main() -> Any:
        return await provider.run(
            "return [n * 2, await lookup('ab')]",
            inputs={"n": 21},
            external_functions={"lookup": lookup},
        )

    assert asyncio.run(main()) == [42, "abab"]


def test_a_clients_state_carries_from_one_execute_to_the_next_and_no_further() -> None:
    # FastMCP's session is the client's on a handshake-era connection; on a 2026-07-28 one every
    # request is a connection of its own, and so is its session.
    async def main() -> None:
        mcp = server()
        async with Client(mcp, mode="legacy") as a, Client(mcp, mode="legacy") as b:
            first = await a.call_tool("execute", {"code": "rows = [1, 2, 3]\nfh = open('/dev/null')\nreturn len(rows)"})
            assert not first.is_error, text(first)
            answer = json.loads(text(first))
            assert answer["result"] == 3
            assert any(line.startswith("fh: an open file") for line in answer["not_kept"]), answer
            second = await a.call_tool("execute", {"code": "return sum(rows)"})
            assert json.loads(text(second)) == 6
            other = await b.call_tool("execute", {"code": "return 'rows' in globals()"})
            assert json.loads(text(other)) is False

    asyncio.run(main())


def test_a_stateless_connection_carries_nothing_between_requests() -> None:
    async def main() -> None:
        async with Client(server()) as client:
            assert not (await client.call_tool("execute", {"code": "kept = 1"})).is_error
            second = await client.call_tool("execute", {"code": "return 'kept' in globals()"})
            assert json.loads(text(second)) is False

    asyncio.run(main())

"""Sessions over MCP, driven by the official Python MCP SDK: `python sessions.py BINARY`. One
gateway over streamable HTTP and two clients: `run_code`'s `session` carries a client's variables
and definitions from one call to the next, and another client naming the same session gets a
fresh, separate one. Exits non-zero on the first failed check. Run by
code-runtime-cli/tests/it/mcp.rs."""

import json
import subprocess
import sys

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import peers
from peers import check

BINARY = sys.argv[1]


async def run(client, code, session):
    result = await client.call_tool("run_code", {"code": code, "language": "python", "session": session})
    return result, json.loads(result.content[0].text)


async def main():
    scratch = peers.scratch_dir()
    config = peers.write_config(scratch, {}, languages=["python"])
    process = await anyio.open_process(
        [BINARY, "mcp", "--config", config, "--http", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = await peers._announced_url(process)
        async with streamable_http_client(url) as (read_a, write_a, *_), \
                streamable_http_client(url) as (read_b, write_b, *_):
            async with ClientSession(read_a, write_a) as a, ClientSession(read_b, write_b) as b:
                await a.initialize()
                await b.initialize()
                tools = await a.list_tools()
                run_code = next(tool for tool in tools.tools if tool.name == "run_code")
                check("session" in run_code.input_schema["properties"], "run_code takes a session", run_code.input_schema)
                check("carry over" in run_code.description, "the description says what a session carries", run_code.description)

                result, first = await run(a, "import statistics\nsecret = [1, 2, 3]\ndef mean(xs):\n    return statistics.mean(xs)\nreturn len(secret)", "work")
                check(not result.is_error and first["value"] == 3, "a's first run", first)
                check(first["session"]["run"] == 1 and first["session"]["restored"] == "new", "a's session is new", first)

                result, theirs = await run(b, "return 'secret' in globals()", "work")
                check(not result.is_error and theirs["value"] is False, "b's session of the same name is its own", theirs)
                check(theirs["session"]["restored"] == "new", "b's session starts new", theirs)

                result, second = await run(a, "return mean(secret)", "work")
                check(not result.is_error and second["value"] == 2, "a's definitions and values carried", second)
                check(second["session"]["run"] == 2, "a's second run", second)

                result, plain = await a.call_tool("run_code", {"code": "return 'secret' in globals()", "language": "python"}), None
                plain = json.loads(result.content[0].text)
                check(plain["value"] is False and "session" not in plain, "a run in no session sees none of it", plain)
    finally:
        process.terminate()
        with anyio.move_on_after(20):
            await process.wait()
    print("all session checks passed")


anyio.run(main)

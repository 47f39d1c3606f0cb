"""An upstream server that asks its client during a call, behind `code-runtime mcp`: its
elicitation reaches the client's user, its sampling the client's model, its progress the
client's `run_code` (under the client's own progress token). Driven by the official Python SDK
over stdio: `python relay.py BINARY`. Exits non-zero on the first failed check."""

import json
import os
import sys

import subprocess

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

import peers
from peers import check

BINARY = sys.argv[1]


async def main():
    scratch = peers.scratch_dir()
    asking = [sys.executable, os.path.join(os.path.dirname(__file__), "asking_server.py")]
    config = peers.write_config(scratch, {"asking": {"command": asking, "approval": "none"}},
                                languages=["typescript", "python"])
    asked, sampled, progress = [], [], []

    async def elicitation(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "blue"})

    async def sampling(context, params):
        sampled.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="a short summary"), model="test-model")

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async with peers.session(BINARY, config, "stdio", elicitation=elicitation, sampling=sampling) as client:
        result = await client.call_tool("run_code", {"code": """
// The SDK's server wraps a plain return value as {"result": ..}.
const colour = (await asking.ask({ question: "Favourite colour?" })).result;
const summary = (await asking.summarize({ text: "a very long text" })).result;
const counted = (await asking.count({ steps: 3 })).result;
return { colour, summary, counted };
"""}, progress_callback=on_progress)
        value = json.loads(result.content[0].text)
        check(not result.is_error and asked == ["Favourite colour?"] and value["value"]["colour"] == "blue",
              "the server's elicitation reached the client's user", (value, asked))
        check(sampled == ["a very long text"] and value["value"]["summary"] == "a short summary",
              "the server's sampling reached the client's model", (value, sampled))
        # The SDK handles each notification on a task of its own, so steps can reach the gateway
        # out of order (and the last one after the answer): what reaches the client increases
        # (MCP requires it; the gateway drops a step that would go back) under the client's token.
        values = [p[0] for p in progress]
        check(value["value"]["counted"] == 3 and values and values == sorted(set(values))
              and set(values) <= {1, 2, 3}
              and all(p[1] == 3 and p[2] == "step %d" % p[0] for p in progress),
              "the server's progress reached the run_code call", progress)
        python = await client.call_tool("run_code", {
            "code": "return await asking.ask(question='Again?')", "language": "python"})
        check(not python.is_error and "blue" in python.content[0].text and asked[-1] == "Again?",
              "from Python too", python.content[0].text)
    # A client that cannot sample: the server's request fails, and the program can catch it.
    async with peers.session(BINARY, config, "stdio") as client:
        result = await client.call_tool("run_code", {"code": """
try { return await asking.summarize({ text: "x" }); } catch (e) { return "caught: " + e.message; }
"""})
        text = result.content[0].text
        check(not result.is_error and "caught:" in text, "a client without sampling: a clear rejection", text)
    await two_clients(config)
    print("all relay checks passed")


async def two_clients(config):
    """Two clients of one server over HTTP, each with a call in flight on the same upstream when
    it asks: MCP does not say whose user to ask, so neither is asked, and both calls fail
    clearly (asking the wrong person is worse)."""
    process = await anyio.open_process(
        [BINARY, "mcp", "--config", config, "--http", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = await peers._announced_url(process)
        asked = []

        async def elicitation(context, params):
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"answer": "mine"})

        outcomes = []

        async def one(name):
            async with streamable_http_client(url) as (read, write, *_):
                async with ClientSession(read, write, elicitation_callback=elicitation) as client:
                    await client.initialize()
                    result = await client.call_tool("run_code", {"code": """
try { return await asking.ask_later({ question: "%s?", seconds: 1.5 }); }
catch (e) { return "refused: " + e.message; }
""" % name})
                    outcomes.append(result.content[0].text)

        async with anyio.create_task_group() as group:
            group.start_soon(one, "first")
            group.start_soon(one, "second")
        check(asked == [] and len(outcomes) == 2 and all("several clients" in text for text in outcomes),
              "calls of two clients in flight: neither user is asked", (asked, outcomes))
    finally:
        process.terminate()
        with anyio.move_on_after(20):
            await process.wait()


anyio.run(main)

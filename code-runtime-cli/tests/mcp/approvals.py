"""Approvals in `code-runtime mcp`, driven by the official Python MCP SDK over stdio:
`python approvals.py BINARY`. A call that needs approval asks the client's user through
elicitation (accept, decline, allow for the rest of the run); a client without elicitation gets
the configured fallback: a denial, or a paused run that `resume_run` continues, on any server
holding the key. Exits non-zero on the first failed check. Run by code-runtime-cli/tests/it/mcp.rs."""

import json
import os
import sys

import anyio
from mcp import types
from mcp.shared.exceptions import MCPError

import peers
from peers import check

BINARY = sys.argv[1]
KEY = "6b6579206f6620636f64652d72756e74696d652074657374732121"
OTHER_KEY = "00112233445566778899aabbccddeeff"
# A key that outlives the server (here, from its environment) needs a spent store given to it:
# the one replicas would share. Set in `main`.
SPENT = []


async def run(client, code, language="typescript"):
    result = await client.call_tool("run_code", {"code": code, "language": language})
    return result.is_error, json.loads(result.content[0].text)


# The config marks `get-s*` of `everything` (whose tools all say readOnlyHint); `memory` keeps the
# default, "destructive": its writes need approval, its reads do not.
PROGRAM = """
const echoed = await everything.echo({ message: "hi" });
const sums = [];
for (const a of [1, 2, 3]) {
  try { sums.push(await everything["get-sum"]({ a, b: 10 })); } catch (e) { sums.push(e.message); }
}
return { echoed, sums };
"""

MEMORY = """
await memory.read_graph({});
await memory.create_entities({ entities: [{ name: "ana", entityType: "person", observations: [] }] });
return (await memory.read_graph({})).entities.length;
"""

PYTHON = """
try:
    total = await everything["get-sum"](a=1, b=2)
except EverythingToolError as error:
    total = str(error)
return total
"""


def answering(*choices):
    """An elicitation callback that answers with `choices` in turn, and keeps what it was asked."""
    asked = []

    async def callback(context, params):
        asked.append(params.message)
        choice = choices[min(len(asked), len(choices)) - 1]
        if choice == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": choice})

    return callback, asked


async def elicited(config, scratch):
    callback, asked = answering("allow")
    async with peers.session(BINARY, config, "stdio", elicitation=callback) as client:
        is_error, result = await run(client, PROGRAM)
        check(not is_error and result["value"]["sums"] == ["The sum of %d and 10 is %d." % (a, a + 10) for a in (1, 2, 3)],
              "allowed calls run", result)
        check(len(asked) == 3 and 'everything.get-sum({"a":1,"b":10})' in asked[0],
              "each marked call is asked about once, naming the call; an unmarked one is not", asked)
        is_error, result = await run(client, MEMORY)
        check(not is_error and result["value"] == 1 and len(asked) == 4 and "memory.create_entities" in asked[3],
              "by default a tool that does not say readOnlyHint is asked about, one that does is not", asked)
    callback, asked = answering("allow", "decline")
    record = os.path.join(scratch, "approvals.jsonl")
    async with peers.session(BINARY, config, "stdio", elicitation=callback, extra=["--record", record]) as client:
        is_error, result = await run(client, PROGRAM)
        sums = result["value"]["sums"]
        check(not is_error and sums[0].startswith("The sum") and sums[1] == "denied: declined by the user"
              and sums[2] == "denied: declined by the user",
              "a declined call rejects, and the program catches it", result)
        is_error, result = await run(client, PYTHON, "python")
        check(not is_error and result["value"] == "denied: declined by the user",
              "a Python program catches the namespace's error class", result)
    with open(record) as file:
        lines = [json.loads(line) for line in file]
    decisions = [(line["approval"]["decision"], line["approval"]["by"]) for line in lines if "approval" in line]
    check(decisions[:3] == [("allow", "client"), ("deny", "client"), ("deny", "client")]
          and [line for line in lines if line.get("approval", {}).get("decision") == "deny"][0]["error"]
          == "denied: declined by the user",
          "--record names each decision and who made it, denials included", lines)
    callback, asked = answering("allow for the rest of this run")
    async with peers.session(BINARY, config, "stdio", elicitation=callback) as client:
        is_error, result = await run(client, PROGRAM)
        check(not is_error and len(asked) == 1 and result["value"]["sums"][2] == "The sum of 3 and 10 is 13.",
              "'allow for the rest of this run' asks once", (asked, result))
        await run(client, PROGRAM)
        check(len(asked) == 2, "and only for that run", asked)


async def without_elicitation(config):
    async with peers.session(BINARY, config, "stdio") as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        check("resume_run" not in tools, "no resume_run without the pause fallback", tools)
        is_error, result = await run(client, PROGRAM)
        check(not is_error and result["value"]["sums"][0].startswith("denied: the client cannot ask its user"),
              "a client without elicitation gets the deny fallback", result)


async def paused(config):
    env = {"CODE_RUNTIME_CHECKPOINT_KEY": KEY}
    async with peers.session(BINARY, config, "stdio", env=env, extra=SPENT) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        check("resume_run" in tools, "the pause fallback offers resume_run", tools)
        is_error, result = await run(client, PROGRAM)
        pending = result.get("paused", {}).get("pending")
        check(not is_error and pending == [{"id": 2, "namespace": "everything", "function": "get-sum", "args": {"a": 1, "b": 10}}]
              and "checkpoint" in result["paused"] and "value" not in result,
              "the run pauses at the first call that needs approval", result)
        checkpoint = result["paused"]["checkpoint"]
        resumed = await client.call_tool("resume_run", {"checkpoint": checkpoint, "allow": [2]})
        again = json.loads(resumed.content[0].text)
        check(not resumed.is_error and again["paused"]["pending"][0]["id"] == 3,
              "resume_run allows the call, and the run pauses at the next", again)
        edited = json.loads(json.dumps(checkpoint).replace('"b":10', '"b":11').replace('"b": 10', '"b": 11'))
        refused = await client.call_tool("resume_run", {"checkpoint": edited, "allow": [2]})
        check(refused.is_error and "signature does not verify" in refused.content[0].text,
              "an edited checkpoint is refused", refused.content[0].text)
    # Another server holding the key resumes it; one with another key does not.
    async with peers.session(BINARY, config, "stdio", env=env, extra=SPENT) as client:
        resumed = await client.call_tool("resume_run", {
            "checkpoint": again["paused"]["checkpoint"],
            "deny": [{"id": 3, "reason": "not today"}],
        })
        final = json.loads(resumed.content[0].text)
        check(not resumed.is_error and final.get("paused") is not None and final["paused"]["pending"][0]["id"] == 4,
              "a replica with the key resumes it", final)
        resumed = await client.call_tool("resume_run", {
            "checkpoint": final["paused"]["checkpoint"], "allow": [4],
        })
        final = json.loads(resumed.content[0].text)
        check(final["value"]["sums"] == ["The sum of 1 and 10 is 11.", "denied: not today", "The sum of 3 and 10 is 13."],
              "the decisions apply, and the run completes", final)
    async with peers.session(BINARY, config, "stdio", env={"CODE_RUNTIME_CHECKPOINT_KEY": OTHER_KEY}, extra=SPENT) as client:
        refused = await client.call_tool("resume_run", {"checkpoint": checkpoint, "allow": [2]})
        check(refused.is_error and "signature does not verify" in refused.content[0].text,
              "a server with another key refuses it", refused.content[0].text)


async def a_kept_key_needs_a_spent_store(config):
    """A key from the environment (shared, like a file's) without --spent-checkpoints is refused
    at start: each replica would resume a checkpoint once."""
    completed = await anyio.run_process([BINARY, "mcp", "--config", config], check=False,
                                        env={**os.environ, "CODE_RUNTIME_CHECKPOINT_KEY": KEY})
    stderr = completed.stderr.decode()
    check(completed.returncode == 2 and "needs --spent-checkpoints DIR" in stderr and KEY not in stderr,
          "a shared key without a shared spent store is misuse", stderr)


async def kept_when_large(config):
    """A paused result whose checkpoint is too large to send (every answer a run got is in it)
    comes back small, with a handle the server keeps it under; resume_run takes the handle. A
    request longer than stdio carries gets an error, never silence."""
    env = {"CODE_RUNTIME_CHECKPOINT_KEY": KEY}
    program = """
    let echoed = 0;
    for (let i = 0; i < 20; i++) echoed += (await everything.echo({ message: "x".repeat(1 << 20) })).length;
    return { echoed, sum: await everything["get-sum"]({ a: 1, b: 2 }) };
    """
    async with peers.session(BINARY, config, "stdio", env=env, extra=SPENT) as client:
        result = await client.call_tool("run_code", {"code": program, "language": "typescript"})
        text = result.content[0].text
        paused = json.loads(text).get("paused", {})
        handle = paused.get("checkpoint", {})
        check(not result.is_error and len(text) < 64 << 10 and list(handle) == ["kept"] and len(handle["kept"]) == 64
              and paused["pending"][0]["function"] == "get-sum",
              "a checkpoint of 40 MB stays on the server: the paused result is small, with a handle", text[:300])
        resumed = await client.call_tool("resume_run", {"checkpoint": handle, "allow": [paused["pending"][0]["id"]]})
        final = json.loads(resumed.content[0].text)
        check(not resumed.is_error and final.get("value") == {"echoed": 20 * ((1 << 20) + 6), "sum": "The sum of 1 and 2 is 3."},
              "resume_run takes the handle, and the run completes", resumed.content[0].text[:300])
        forged = await client.call_tool("resume_run", {"checkpoint": {"kept": "ab" * 32}, "allow": [1]})
        check(forged.is_error and "no checkpoint is kept under this handle" in str(forged.content[0].text),
              "a handle nothing is kept under is refused", forged.content[0].text)
        try:
            with anyio.fail_after(120):
                await client.call_tool("resume_run", {"checkpoint": "x" * (17 << 20)})
            check(False, "a request longer than stdio carries is answered")
        except MCPError as error:
            check("longer than the 16777216 bytes" in str(error), "it is answered with an error naming the bound", str(error))
        is_error, after = await run(client, "return 6 * 7")
        check(not is_error and after["value"] == 42, "and the session goes on", after)


async def main():
    scratch = peers.scratch_dir()
    everything = {"command": peers.everything_command(), "approval": ["get-s*"]}
    memory, memory_env = peers.memory_command(scratch)
    servers = {"everything": everything, "memory": {"command": memory, "env": memory_env}}
    config = peers.write_config(scratch, servers)
    await elicited(config, scratch)
    await without_elicitation(config)
    pausing = peers.write_config(scratch, servers, extra={"approvalFallback": "pause"})
    SPENT.extend(["--spent-checkpoints", os.path.join(scratch, "spent")])
    await paused(pausing)
    await kept_when_large(pausing)
    await a_kept_key_needs_a_spent_store(pausing)
    print("all approval checks passed")


anyio.run(main)

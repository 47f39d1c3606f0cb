"""`code-runtime mcp` driven by the official Python MCP SDK, over one transport, against the
reference servers from npm: `python suite.py BINARY stdio|http`. Exits non-zero on the first
failed check, saying which. Run by code-runtime-cli/tests/it/mcp.rs."""

import json
import os
import sys

import anyio

import peers
from peers import check

BINARY, TRANSPORT = sys.argv[1], sys.argv[2]


async def run(client, code, language="typescript", **extra):
    result = await client.call_tool("run_code", {"code": code, "language": language, **extra})
    text = result.content[0].text
    if result.structured_content != json.loads(text):
        sys.exit("FAILED: the text and structuredContent of a result differ: %r" % text)
    return result.is_error, result.structured_content


FAN_OUT_TS = """
const sums = await Promise.all(Array.from({ length: 20 }, (_, i) => everything["get-sum"]({ a: i, b: 100 })));
return sums;
"""

FAN_OUT_PY = """
sums = await asyncio.gather(*(everything["get-sum"](a=i, b=100) for i in range(20)))
return sums
"""

SEQUENTIAL_TS = """
await memory.create_entities({ entities: [{ name: "ana", entityType: "person", observations: ["writes rust"] }] });
await memory.add_observations({ observations: [{ entityName: "ana", contents: ["reviews python"] }] });
const graph = await memory.open_nodes({ names: ["ana"] });
const weather = await everything["get-structured-content"]({ location: "Chicago" });
return { observations: graph.entities[0].observations, conditions: typeof weather.conditions };
"""

SEQUENTIAL_PY = """
found = await memory.search_nodes(query="ana")
echoed = await everything.echo(message="from python")
return {"names": [e["name"] for e in found["entities"]], "echoed": echoed}
"""


async def upstream_calls(client):
    is_error, result = await run(client, FAN_OUT_TS)
    check(not is_error and result["value"] == ["The sum of %d and 100 is %d." % (i, i + 100) for i in range(20)],
          "a TypeScript program fans out 20 calls to one upstream", result)
    is_error, result = await run(client, FAN_OUT_PY, "python")
    check(not is_error and len(result["value"]) == 20 and result["value"][19] == "The sum of 19 and 100 is 119.",
          "a Python program fans out 20 calls (keyword arguments)", result)
    is_error, result = await run(client, SEQUENTIAL_TS)
    check(not is_error and result["value"] == {"observations": ["writes rust", "reviews python"], "conditions": "string"},
          "a TypeScript program calls two upstream servers in sequence (structuredContent as values)", result)
    is_error, result = await run(client, SEQUENTIAL_PY, "python")
    check(not is_error and result["value"] == {"names": ["ana"], "echoed": "Echo: from python"},
          "a Python program calls two upstream servers (text content as the value)", result)


async def restarts(client):
    is_error, result = await run(client, """
const before = await flaky.ping();
let crashed;
try { await flaky.crash(); } catch (e) { crashed = e.message; }
const after = await flaky.ping();
return { before: before.result, crashed, after: after.result };
""")
    value = result.get("value") or {}
    check(not is_error and "went away during the call" in value.get("crashed", "")
          and value["before"].startswith("pong") and value["after"].startswith("pong")
          and value["before"] != value["after"],
          "an upstream server that dies fails the call in flight and is started again", result)


async def hostile_upstream(client):
    is_error, result = await run(client, """
const outcomes = {};
for (const name of ["deep", "garbage", "silent"]) {
  try { outcomes[name] = await garbled[name]({}); } catch (e) { outcomes[name] = e.message; }
}
outcomes.after = await garbled.ok({});
return outcomes;
""")
    value = result.get("value") or {}
    check(not is_error and all("did not answer within 1000 ms" in str(value.get(name)) for name in ("deep", "garbage", "silent"))
          and value.get("after") == "fine",
          "an upstream answer too deep to read, one that is not JSON, and none at all reject in time", result)


async def hostile_programs(client, logs):
    # A result nested 30 000 deep: the server used to re-parse it into structuredContent and drop
    # it recursively on a worker's stack, killing every session. It comes back as text only.
    for language, code in (
        ("typescript", "let v = null; for (let i = 0; i < 30000; i++) v = [v]; return v;"),
        ("python", "v = None\nfor _ in range(30000):\n    v = [v]\nreturn v"),
    ):
        result = await client.call_tool("run_code", {"code": code, "language": language})
        text = result.content[0].text
        check(not result.is_error and result.structured_content is None
              and text.startswith('{"logs":[],"value":[[[') and len(text) == 60024,
              "a 30 000-deep %s result is text only, and the server lives on" % language, text[:80])
    # Text from an upstream tool that is a deep value, followed by garbage or not.
    is_error, result = await run(client, """
const text = await garbled.deep_text({});
let value = await garbled.deep_value({}), depth = 0;
while (Array.isArray(value) && value.length) { value = value[0]; depth++; }
return { text: typeof text, depth: depth + 1 };
""")
    check(not is_error and result["value"] == {"text": "string", "depth": 100000},
          "an upstream text of 100 000 levels (and garbage) is parsed without recursion", result)
    # Many lines: at most a thousand notifications, then one that counts the rest.
    del logs[:]
    is_error, result = await run(client, "for (let i = 0; i < 5000; i++) console.log(i); return 1")
    await notified(logs, 1001)
    check(not is_error and len(result["logs"]) == 5000 and len(logs) == 1001 and logs[999] == "999"
          and logs[1000].startswith("… 4000 more lines"),
          "a run's log notifications are bounded; the result has every line", logs[-2:])


async def notified(logs, count):
    """Waits (10 s at most) until `count` log notifications came, then a little more for any
    extra. The server sends a run's notifications before its result, but the result may still be
    read first: the SDK hands notifications to its callback in the background, and over streamable
    HTTP they travel on the session's standalone GET stream, not the POST's."""
    with anyio.move_on_after(10):
        while len(logs) < count:
            await anyio.sleep(0.02)
    await anyio.sleep(0.2)


async def positional(client):
    is_error, result = await run(client, """
return [await everything.echo("positional"), await everything["get-sum"](2, 3)];
""")
    check(not is_error and result["value"] == ["Echo: positional", "The sum of 2 and 3 is 5."],
          "positional arguments take the upstream input schema's property names", result)
    is_error, result = await run(client, "return await everything.echo(['not', 'an', 'object'], 2)")
    check(is_error and "TypeError" in result["error"]["message"],
          "more arguments than the tool has properties is a TypeError", result)


async def failures(client):
    is_error, result = await run(client, """
try {
  await memory.add_observations({ observations: [{ entityName: "nobody", contents: ["x"] }] });
  return "no error";
} catch (e) {
  return { cls: e.constructor.name, isClass: e instanceof MemoryToolError, tool: e.toolName, message: e.message };
}
""")
    check(not is_error and result["value"]["isClass"] and result["value"]["tool"] == "add_observations"
          and "nobody" in result["value"]["message"],
          "an upstream isError rejects with the namespace's error class", result)
    is_error, result = await run(client, """
try:
    await memory.add_observations({"observations": [{"entityName": "nobody", "contents": ["x"]}]})
except MemoryToolError as e:
    return {"tool": e.toolName, "message": str(e)}
""", "python")
    check(not is_error and result["value"]["tool"] == "add_observations", "the same in Python", result)
    is_error, result = await run(client, "throw new TypeError('boom')")
    check(is_error and result["error"]["kind"] == "exception" and "boom" in result["error"]["message"],
          "a program error is an isError result with the run's error", result)
    is_error, result = await run(client, "return 1 +", "python")
    check(is_error and result["error"]["kind"] == "exception" and "SyntaxError" in result["error"]["message"],
          "a Python syntax error is an isError result", result)
    is_error, result = await run(client, """
const calls = Array.from({ length: 40 }, (_, i) => everything["get-sum"]({ a: i, b: 0 }));
const settled = await Promise.allSettled(calls);
const refused = settled.filter((s) => s.status === "rejected");
return { refused: refused.length, message: refused[0].reason.message };
""")
    check(not is_error and result["value"]["refused"] == 10 and "at most 30 binding calls" in result["value"]["message"],
          "the config's call budget refuses calls past it", result)
    # Arguments are typed: a wrong one is the model's to read (a failed tool result naming the
    # field), and an unknown tool names the ones there are.
    result = await client.call_tool("run_code", {"language": "typescript"})
    check(result.is_error and "code" in result.content[0].text,
          "run_code without code is a tool error naming the field", result)
    result = await client.call_tool("describe_tools", {"names": "memory"})
    check(result.is_error and "sequence" in result.content[0].text,
          "describe_tools' names must be an array", result)
    try:
        await client.call_tool("run_it", {"code": "return 1"})
        check(False, "an unknown tool is refused")
    except Exception as error:  # the SDK raises the JSON-RPC error
        check("unknown tool" in str(error) and "run_code, search_tools, describe_tools" in str(error),
              "an unknown tool is refused, naming the tools", error)


async def logging(client, logs):
    del logs[:]
    is_error, result = await run(client, """
console.log("first");
await everything.echo({ message: "between" });
console.log("second", { n: 2 });
return "done";
""")
    await notified(logs, 2)
    check(not is_error and logs == ["first", "second { n: 2 }"],
          "log notifications arrive, in order", logs)
    del logs[:]
    is_error, result = await run(client, "print('from python')\nreturn 1", "python")
    await notified(logs, 1)
    check(logs == ["from python"] and result["logs"] == ["from python"], "Python prints become log notifications", logs)


async def cancellation(client):
    # The program records a tick in the memory server every 50 ms until it is stopped: once the
    # client cancels the call, the ticks stop growing.
    ticking = """
for (let i = 0; ; i++) {
  await memory.create_entities({ entities: [{ name: "tick" + i, entityType: "tick", observations: [] }] });
  await new Promise((resolve) => setTimeout(resolve, 50));
}
"""
    with anyio.move_on_after(1.5) as scope:
        await client.call_tool("run_code", {"code": ticking})
    check(scope.cancelled_caught, "the client gave up on the call")
    count = """
const graph = await memory.search_nodes({ query: "tick" });
return graph.entities.filter((e) => e.entityType === "tick").length;
"""
    await anyio.sleep(0.5)
    _, first = await run(client, count)
    await anyio.sleep(1.0)
    _, second = await run(client, count)
    check(first["value"] > 0 and first["value"] == second["value"],
          "a cancelled run stops making calls", (first, second))


async def concurrency(client):
    # A rendezvous: `b` leaves its mark and waits for `a`'s; `a` waits for `b`'s, then leaves its
    # own. Served one after the other, the first would wait alone. (The writes never overlap:
    # server-memory rewrites its file on each, and two at once lose one.)
    wait = """
for (let i = 0; i < 25; i++) {
  const found = await memory.search_nodes({ query: "%s" });
  if (found.entities.some((e) => e.name === "%s")) return true;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
return false;
"""
    mark = 'await memory.create_entities({ entities: [{ name: "%s", entityType: "mark", observations: [] }] });'
    a = "const met = await (async () => {%s})();\nif (met) %s\nreturn met ? 'met' : 'alone';" % (
        wait % ("mark-b", "mark-b"), mark % "mark-a")
    b = "%s\nconst met = await (async () => {%s})();\nreturn met ? 'met' : 'alone';" % (
        mark % "mark-b", wait % ("mark-a", "mark-a"))
    results = {}

    async def one(name, code):
        results[name] = await run(client, code)

    async with anyio.create_task_group() as group:
        group.start_soon(one, "a", a)
        group.start_soon(one, "b", b)
    check(results["a"][1].get("value") == "met" and results["b"][1].get("value") == "met",
          "two run_code calls are served at the same time", results)


async def catalogue(client):
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    check(sorted(tools) == ["describe_tools", "run_code", "search_tools"], "the three tools are listed", sorted(tools))
    description = tools["run_code"].description
    check("declare const everything" in description and "declare namespace memory" in description
          and "For python, describe_tools" in description,
          "run_code's description carries the declarations that fit, and points at describe_tools",
          description[:400])
    found = await client.call_tool("search_tools", {"query": "sum numbers"})
    names = [tool["name"] for tool in found.structured_content["tools"]]
    check(names[0] == "everything.get-sum", "search_tools ranks the matching tool first", names)
    described = await client.call_tool("describe_tools", {"names": ["memory.read_graph"], "language": "python"})
    text = described.content[0].text
    check("async def read_graph" in text and "create_entities" not in text,
          "describe_tools declares only what it was asked for", text)


# These checks are of whole results (deep ones, thousands of log lines): shrinking them to the
# default 6 000 tokens is gateway.py's to check.
TRUNCATE_OFF = {"truncate": False}


async def main():
    scratch = peers.scratch_dir()
    memory, memory_env = peers.memory_command(scratch)
    flaky = [sys.executable, os.path.join(os.path.dirname(__file__), "flaky_server.py")]
    garbled = [sys.executable, os.path.join(os.path.dirname(__file__), "garbled_server.py")]
    # These checks are of calls, not approvals (approvals.py): no tool needs one.
    servers = {
        "memory": {"command": memory, "env": memory_env, "approval": "none"},
        "flaky": {"command": flaky, "approval": "none"},
        "garbled": {"command": garbled, "timeoutMs": 1000, "approval": "none"},
    }
    logs = []
    record = os.path.join(scratch, "record.jsonl")
    extra = ["--record", record]
    if TRANSPORT == "http":
        # Over HTTP, the upstream is reached over HTTP too.
        with peers.everything_over_http() as url:
            servers["everything"] = {"url": url, "approval": "none"}
            config = peers.write_config(scratch, servers, {"maxCalls": 30}, extra=TRUNCATE_OFF)
            async with peers.session(BINARY, config, TRANSPORT, logs, extra) as client:
                await suite(client, logs)
                audited(record)
    else:
        servers["everything"] = {"command": peers.everything_command(), "approval": "none"}
        config = peers.write_config(scratch, servers, {"maxCalls": 30}, extra=TRUNCATE_OFF)
        async with peers.session(BINARY, config, TRANSPORT, logs, extra) as client:
            await suite(client, logs)
            audited(record)
    print("all checks passed over", TRANSPORT)


def audited(record):
    lines = []
    with open(record) as file:
        for line in file:
            try:
                lines.append(json.loads(line))
            except RecursionError:
                # The deep upstream values: Python's own parser cannot read them back.
                check(line.startswith('{"namespace":"garbled","function":"deep_'), "a deep record line", line[:80])
    sums = [line for line in lines if line["namespace"] == "everything" and line["function"] == "get-sum"]
    failed = [line for line in lines if line["function"] == "add_observations" and "error" in line]
    check(len(sums) >= 40 and all("ok" in line and "durationMs" in line for line in sums) and failed,
          "--record has one line per upstream call, failures included", lines[:3])


async def suite(client, logs):
    await catalogue(client)
    await upstream_calls(client)
    await positional(client)
    await restarts(client)
    await hostile_upstream(client)
    await hostile_programs(client, logs)
    await failures(client)
    await logging(client, logs)
    await concurrency(client)
    await cancellation(client)


anyio.run(main)

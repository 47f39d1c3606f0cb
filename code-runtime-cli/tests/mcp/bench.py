"""One `run_code` whose program makes 20 upstream calls at once, against the same 20 calls made
directly by the client, both over stdio against one server-everything: `python bench.py BINARY
[--quick] [--json]` (run by `cargo xtask bench-mcp`). Prints both p50 wall times and the program
path's overhead over the direct one."""

import json
import statistics
import sys
import time

import anyio

import peers

BINARY = sys.argv[1]
QUICK = "--quick" in sys.argv
AS_JSON = "--json" in sys.argv
ROUNDS = 10 if QUICK else 40
WARMUP = 3
CALLS = 20

PROGRAM = """
const sums = await Promise.all(Array.from({ length: %d }, (_, i) => everything["get-sum"]({ a: i, b: 1 })));
return sums.length;
""" % CALLS


async def timed(rounds, once):
    for _ in range(WARMUP):
        await once()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await once()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def direct():
    async with peers.direct(peers.everything_command()) as client:
        async def once():
            async with anyio.create_task_group() as group:
                for i in range(CALLS):
                    group.start_soon(client.call_tool, "get-sum", {"a": i, "b": 1})
        return await timed(ROUNDS, once)


async def program():
    scratch = peers.scratch_dir()
    # The overhead of code mode, not of approvals: no call needs one.
    everything = {"command": peers.everything_command(), "approval": "none"}
    config = peers.write_config(scratch, {"everything": everything}, languages=["typescript"])
    async with peers.session(BINARY, config, "stdio") as client:
        async def once():
            result = await client.call_tool("run_code", {"code": PROGRAM})
            if result.is_error or result.structured_content.get("value") != CALLS:
                raise RuntimeError("the program failed: %s" % result.content[0].text)
        return await timed(ROUNDS, once)


async def main():
    # Interleaved halves, so drift on a shared machine falls on both paths alike.
    direct_ms, program_ms = [], []
    for _ in range(2):
        direct_ms += await direct()
        program_ms += await program()
    figures = {
        "calls": CALLS,
        "rounds": len(direct_ms),
        "direct_p50_ms": round(statistics.median(direct_ms), 2),
        "run_code_p50_ms": round(statistics.median(program_ms), 2),
    }
    figures["overhead_p50_ms"] = round(figures["run_code_p50_ms"] - figures["direct_p50_ms"], 2)
    figures["bar_ms"] = 10
    if AS_JSON:
        print(json.dumps(figures))
        return
    print("20 upstream calls over stdio, server-everything get-sum, %d rounds each" % figures["rounds"])
    print("  direct from the client (20 concurrent tools/call)  p50 %8.2f ms" % figures["direct_p50_ms"])
    print("  one run_code fanning out 20 calls (TypeScript)      p50 %8.2f ms" % figures["run_code_p50_ms"])
    print("  overhead of the program path                        p50 %8.2f ms   (bar: < %d ms)"
          % (figures["overhead_p50_ms"], figures["bar_ms"]))


anyio.run(main)

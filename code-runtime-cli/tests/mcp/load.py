"""A load test of `code-runtime mcp` over streamable HTTP: `python load.py BINARY [--runs N]
[--again K] [--quick] [--json]` (run by `cargo xtask bench-mcp`). N `run_code` calls at once (default 1 000;
200 with --quick) from 10 client sessions, half TypeScript and half Python, each waiting on a
200 ms timer and making two upstream calls to server-everything. Reports how many succeeded,
the timer's lateness inside the programs, the server's resident memory and open descriptors at
start, at peak and after, the whole process tree's proportional memory (PSS) at start and at its
peak with the runs then in flight (what a replica needs per run it holds), and the processes of the server's tree before and after (spare cells
and the upstream server are there before; nothing of a run may be left); then the same load
K more times (default 2), and the memory after each (what grows round after round would be a
leak)."""

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import peers

BINARY = sys.argv[1]
QUICK = "--quick" in sys.argv
AS_JSON = "--json" in sys.argv
RUNS = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else (200 if QUICK else 1000)
# How many times the same load runs again after the first, memory read after each.
AGAIN = int(sys.argv[sys.argv.index("--again") + 1]) if "--again" in sys.argv else 2
SESSIONS = 10

TYPESCRIPT = """
const started = Date.now();
await new Promise((resolve) => setTimeout(resolve, 200));
const late = Date.now() - started - 200;
const [a, b] = await Promise.all([everything["get-sum"]({ a: 1, b: 2 }), everything.echo({ message: "x" })]);
return { late, ok: JSON.stringify(a).includes("3") && JSON.stringify(b).includes("x") };
"""

PYTHON = """
import asyncio, json, time
started = time.monotonic()
await asyncio.sleep(0.2)
late = (time.monotonic() - started) * 1000 - 200
a, b = await asyncio.gather(everything["get-sum"](a=1, b=2), everything.echo(message="x"))
return {"late": late, "ok": "3" in json.dumps(a) and "x" in json.dumps(b)}
"""


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pss_kb(pid):
    """What a process holds of memory, its shared pages divided among their sharers (so a tree's
    sum counts each page once)."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass  # gone since it was listed
    return 0


def tree_pss_mb(pid):
    return sum(pss_kb(each) for each in [pid, *tree(pid)]) / 1024


def in_flight(url):
    """The server's gauge of runs running now."""
    try:
        with urllib.request.urlopen(url.rsplit("/mcp", 1)[0] + "/metrics", timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("code_runtime_runs_in_flight "):
                    return int(float(line.split()[1]))
    except OSError:
        pass
    return 0


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def tree(pid):
    """The processes under `pid` (not itself)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


async def main():
    scratch = peers.scratch_dir()
    everything = {"command": peers.everything_command(), "approval": "none"}
    config = peers.write_config(scratch, {"everything": everything}, limits={"maxCalls": 10},
                                extra={"truncate": False})
    process = await anyio.open_process(
        [BINARY, "mcp", "--config", config, "--http", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = await peers._announced_url(process)
        await anyio.sleep(2)  # the spare cells started ahead
        start = {"rss_mb": rss_kb(process.pid) / 1024, "fds": fds(process.pid)}
        before = len(tree(process.pid))
        peak = dict(start)
        # The whole tree (the server, its cells, the upstream server), with the runs in flight
        # when it held the most: what a replica needs per run it holds.
        tree_start = tree_pss_mb(process.pid)
        tree_peak = {"pss_mb": tree_start, "in_flight": 0}
        outcomes = []
        done = anyio.Event()

        async def watch():
            while not done.is_set():
                peak["rss_mb"] = max(peak["rss_mb"], rss_kb(process.pid) / 1024)
                peak["fds"] = max(peak["fds"], fds(process.pid))
                await anyio.sleep(0.05)

        async def watch_tree():
            while not done.is_set():
                running = await anyio.to_thread.run_sync(in_flight, url)
                held = await anyio.to_thread.run_sync(tree_pss_mb, process.pid)
                if held > tree_peak["pss_mb"]:
                    tree_peak.update(pss_mb=held, in_flight=running)
                await anyio.sleep(0.2)

        async def session(index):
            async with streamable_http_client(url) as (read, write, *_):
                async with ClientSession(read, write) as client:
                    await client.initialize()

                    async def one(number):
                        language = "typescript" if number % 2 == 0 else "python"
                        code = TYPESCRIPT if language == "typescript" else PYTHON
                        try:
                            result = await client.call_tool("run_code", {"code": code, "language": language})
                            value = json.loads(result.content[0].text)
                            ok = not result.is_error and value.get("value", {}).get("ok") is True
                            outcomes.append((language, ok, value.get("value", {}).get("late"), value))
                        except Exception as error:  # a failed call is a failed run
                            outcomes.append((language, False, None, repr(error)))

                    async with anyio.create_task_group() as group:
                        for number in range(index, RUNS, SESSIONS):
                            group.start_soon(one, number)

        started = time.perf_counter()
        async with anyio.create_task_group() as outer:
            outer.start_soon(watch)
            outer.start_soon(watch_tree)
            async with anyio.create_task_group() as group:
                for index in range(SESSIONS):
                    group.start_soon(session, index)
            done.set()
        seconds = time.perf_counter() - started
        await anyio.sleep(3)  # the last cells reaped, the spares started again
        after = {"rss_mb": rss_kb(process.pid) / 1024, "fds": fds(process.pid)}
        left = len(tree(process.pid))
        # The same load again: memory that grows round after round is a leak; memory the
        # allocator keeps from the first round for the next is not.
        first = len(outcomes)
        again = []
        for _ in range(AGAIN):
            async with anyio.create_task_group() as group:
                for index in range(SESSIONS):
                    group.start_soon(session, index)
            await anyio.sleep(3)
            again.append(round(rss_kb(process.pid) / 1024, 1))
        again_fds = fds(process.pid)
        again_ok = sum(1 for outcome in outcomes[first:] if outcome[1])
        outcomes = outcomes[:first]
    finally:
        process.terminate()
        with anyio.move_on_after(30):
            await process.wait()
    late = [outcome[2] for outcome in outcomes if outcome[2] is not None]
    figures = {
        "runs": RUNS,
        "ok": sum(1 for outcome in outcomes if outcome[1]),
        "seconds": round(seconds, 2),
        "timer_late_ms": {"p50": round(statistics.median(late), 1), "max": round(max(late), 1)} if late else None,
        "rss_mb": {key: round(value["rss_mb"], 1) for key, value in (("start", start), ("peak", peak), ("after", after))},
        "fds": {"start": start["fds"], "peak": peak["fds"], "after": after["fds"]},
        "processes": {"before": before, "after": left},
        "tree_pss_mb": {"start": round(tree_start, 1), "peak": round(tree_peak["pss_mb"], 1),
                        "in_flight_at_peak": tree_peak["in_flight"],
                        "per_run": round((tree_peak["pss_mb"] - tree_start) / tree_peak["in_flight"], 2)
                        if tree_peak["in_flight"] else None},
        "again": {"ok": again_ok, "rss_mb_after_each": again, "fds": again_fds},
    }
    failures = [outcome[3] for outcome in outcomes if not outcome[1]][:3]
    if AS_JSON:
        print(json.dumps(figures))
    else:
        print("%d run_code at once over HTTP (half TypeScript, half Python; a 200 ms timer and two upstream calls each)" % RUNS)
        print("  succeeded            %d of %d in %.1f s" % (figures["ok"], RUNS, seconds))
        if late:
            print("  timer lateness       p50 %.1f ms, max %.1f ms" % (figures["timer_late_ms"]["p50"], figures["timer_late_ms"]["max"]))
        print("  server RSS (MB)      start %(start).1f  peak %(peak).1f  after %(after).1f" % figures["rss_mb"])
        print("  server fds           start %(start)d  peak %(peak)d  after %(after)d" % figures["fds"])
        print("  processes (tree)     before %(before)d  after %(after)d" % figures["processes"])
        print("  tree PSS (MB)        start %(start).1f  peak %(peak).1f with %(in_flight_at_peak)d runs in flight"
              " (%(per_run)s MB a run)" % figures["tree_pss_mb"])
        print("  the same load again  %d of %d succeeded; RSS after each %s MB, then %d fds"
              % (again_ok, AGAIN * RUNS, " and ".join("%.1f" % mb for mb in again), again_fds))
        for failure in failures:
            print("  a failure:", str(failure)[:300])
    if figures["ok"] != RUNS or again_ok != AGAIN * RUNS or left > before:
        sys.exit(1)


anyio.run(main)

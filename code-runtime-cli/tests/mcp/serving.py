"""`code-runtime mcp --http` served for a team, driven by the official Python MCP SDK:
`python serving.py BINARY`. A bearer token on /mcp and /metrics (not /healthz or /livez), Prometheus
metrics that count what happened, a cap on concurrent runs that queues the rest, and a SIGTERM
that drains the run in flight, refuses new ones, then exits 0. Exits non-zero on the first failed
check. Run by code-runtime-cli/tests/it/mcp.rs."""

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import peers
from peers import check

BINARY = sys.argv[1]
TOKEN = "team-token-0123456789"


def get(url, token=None):
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def post_initialize(url, token):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = "Bearer " + token
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def metric(text, name, **labels):
    """The value of one sample of the Prometheus text, 0 when absent."""
    wanted = ",".join('%s="%s"' % item for item in sorted(labels.items()))
    for line in text.splitlines():
        match = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if match and match.group(1) == name:
            given = ",".join(sorted((match.group(2) or "").split(","))) if match.group(2) else ""
            if given == wanted:
                return float(match.group(3))
    return 0.0


async def run(client, code, language="typescript"):
    result = await client.call_tool("run_code", {"code": code, "language": language})
    return result.is_error, json.loads(result.content[0].text) if result.content[0].text.startswith("{") else result.content[0].text


SLEEP = "const start = Date.now(); await new Promise((r) => setTimeout(r, %d)); return [start, Date.now()];"


async def main():
    scratch = peers.scratch_dir()
    token_file = os.path.join(scratch, "token")
    with open(token_file, "w") as file:
        file.write(TOKEN + "\n")
    servers = {"everything": {"command": peers.everything_command(), "approval": "none"}}
    config = peers.write_config(scratch, servers, languages=["typescript", "python"])
    process = await anyio.open_process(
        [BINARY, "mcp", "--config", config, "--http", "127.0.0.1:0", "--auth-token-file", token_file,
         "--max-concurrent-runs", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = await peers._announced_url(process)
    base = url.rsplit("/mcp", 1)[0]
    check(get(base + "/healthz") == (200, "ok\n"), "/healthz answers without a token")
    check(get(base + "/livez") == (200, "live\n"), "/livez answers without a token")
    check(post_initialize(url, None) == 401 and post_initialize(url, "wrong") == 401
          and post_initialize(url, TOKEN[:-1]) == 401, "/mcp refuses a request without the right token")
    check(post_initialize(url, TOKEN) == 200, "/mcp takes the right token")
    check(get(base + "/metrics")[0] == 401, "/metrics needs the token too")

    http = create_mcp_http_client(headers={"Authorization": "Bearer " + TOKEN})
    async with streamable_http_client(url, http_client=http) as (read, write, *_):
        async with ClientSession(read, write) as client:
            await client.initialize()
            failed, value = await run(client, "return await everything.echo({ message: 'hi' })")
            check(not failed, "a run with an upstream call", value)
            failed, value = await run(client, "throw new Error('boom')")
            check(failed and value["error"]["kind"] == "exception", "a failing run", value)
            failed, value = await run(client, "return 1 + 1", "python")
            check(not failed and value["value"] == 2, "a Python run", value)
            # The cap: three runs sent at once take their turns, one at a time.
            spans = []

            async def sleeper():
                failed, value = await run(client, SLEEP % 200)
                check(not failed, "a capped run", value)
                spans.append(value["value"])

            async with anyio.create_task_group() as group:
                for _ in range(3):
                    group.start_soon(sleeper)
            spans.sort()
            check(all(spans[i][1] <= spans[i + 1][0] for i in range(2)),
                  "--max-concurrent-runs 1: the runs did not overlap", spans)

            status, text = get(base + "/metrics", TOKEN)
            check(status == 200 and "# TYPE code_runtime_runs_total counter" in text, "/metrics is Prometheus text", text[:300])
            check(metric(text, "code_runtime_runs_total", language="typescript", outcome="ok") == 4
                  and metric(text, "code_runtime_runs_total", language="typescript", outcome="exception") == 1
                  and metric(text, "code_runtime_runs_total", language="python", outcome="ok") == 1,
                  "runs are counted by language and outcome", text)
            check(metric(text, "code_runtime_run_duration_seconds_count", language="typescript") == 5,
                  "every run's duration is in the histogram", text)
            check(metric(text, "code_runtime_calls_total", namespace="everything", outcome="ok") == 1,
                  "calls are counted by namespace", text)
            check(metric(text, "code_runtime_runs_in_flight") == 0 and metric(text, "code_runtime_runs_queued") == 0,
                  "nothing in flight or queued now", text)
            check(metric(text, "code_runtime_cells_alive") >= 1, "the spare cells are alive", text)

            # SIGTERM while a run is in flight: it finishes, a new one is refused, then exit 0.
            async with anyio.create_task_group() as group:
                outcome = {}

                async def long_run():
                    outcome["long"] = await run(client, SLEEP % 1500)

                group.start_soon(long_run)
                with anyio.fail_after(60):
                    while metric(get(base + "/metrics", TOKEN)[1], "code_runtime_runs_in_flight") != 1:
                        await anyio.sleep(0.02)
                process.send_signal(signal.SIGTERM)
                with anyio.fail_after(60):
                    while get(base + "/healthz")[0] != 503:
                        await anyio.sleep(0.02)
                check(get(base + "/livez")[0] == 200, "/healthz says 503 once draining; /livez stays 200")
                failed, value = await run(client, "return 1")
                check(failed and "shutting down" in value, "a new run is refused while draining", value)
            failed, value = outcome["long"]
            check(not failed and len(value["value"]) == 2, "the run in flight finished", value)
    with anyio.fail_after(60):
        code = await process.wait()
    rest = b""
    async for chunk in process.stderr:
        rest += chunk
    check(code == 0 and b"draining 1 run(s) in flight" in rest, "the server exited 0 after the drain", (code, rest))
    print("all serving checks passed")


anyio.run(main)

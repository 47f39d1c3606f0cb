"""Replicas of `code-runtime mcp --http` behind a real load balancer, on loopback:
`python replicas.py BINARY`. Three replicas, each with a home of its own (as on three machines)
but one checkpoint key and one spent-checkpoint directory, behind haproxy (Debian's), which
routes a session by its `Mcp-Session-Id`, health-checks `/healthz` and names the replica that
answered in `X-Replica`. Checks, in this order:

(a) a run paused on one replica resumes through the balancer on another, with an exact result,
    and a second resume of the same checkpoint, on the third, is refused;
(b) 1 000 `run_code` calls from sessions spread over the replicas are all answered;
(d) SIGTERM on a replica under load: it turns unready, finishes its runs, exits 0; no run lost;
(c) SIGKILL on a replica under load: every call it held fails with a clear error, none hangs,
    every other call completes.

Everything is started and stopped here, each step bounded in time. Exits non-zero on the first
failed check. Run by code-runtime-cli/tests/it/mcp.rs."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import anyio
import httpx2 as httpx

import peers
from peers import check

BINARY = sys.argv[1]
KEY = "7265706c69636173206f6620636f64652d72756e74696d652121"
PROTOCOL = "2025-06-18"
# The longest any step may take: a hang fails the test instead of stalling it.
STEP_SECONDS = 180

PAUSING = """
const sums = [];
for (const a of [1, 2]) sums.push(await everything["get-sum"]({ a, b: 10 }));
return sums;
"""

# A run that holds its replica for a while, so the load has runs in flight to drain or lose.
HOLDING = {
    "typescript": "await new Promise((resolve) => setTimeout(resolve, %d)); return 'ok';",
    "python": "import asyncio\nawait asyncio.sleep(%f)\nreturn 'ok'",
}


def holding(language, ms):
    return HOLDING[language] % (ms if language == "typescript" else ms / 1000)


class Failed(Exception):
    """A call that got no result: what the transport or the balancer said."""


class Session:
    """One MCP session through the balancer, spoken in plain HTTP, so every failure is seen as
    it comes (a status, a cut stream) and bounded by a timeout."""

    def __init__(self, client, url):
        self.client, self.url = client, url
        self.id, self.replica, self.next_id = None, None, 1

    async def open(self):
        params = {"protocolVersion": PROTOCOL, "capabilities": {},
                  "clientInfo": {"name": "replicas", "version": "1"}}
        _, response = await self.request("initialize", params)
        self.id = response.headers.get("mcp-session-id")
        self.replica = response.headers.get("x-replica")
        if not self.id or not self.replica:
            raise Failed("initialize answered without a session id or a replica: %r" % dict(response.headers))
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def run(self, code, language="typescript"):
        return await self.tool("run_code", {"code": code, "language": language})

    async def tool(self, name, arguments):
        """(is_error, the tool's JSON result, the replica that answered)."""
        message, response = await self.request("tools/call", {"name": name, "arguments": arguments})
        if "error" in message:
            raise Failed("JSON-RPC error: %s" % message["error"])
        result = message["result"]
        text = result["content"][0]["text"]
        try:
            value = json.loads(text)
        except ValueError:
            value = text  # a tool error in words (a refused checkpoint, say)
        return result.get("isError", False), value, response.headers.get("x-replica")

    async def request(self, method, params):
        number = self.next_id
        self.next_id += 1
        response, messages = await self.post({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        for message in messages:
            if message.get("id") == number:
                return message, response
        raise Failed("no answer to %s in %r" % (method, messages))

    async def post(self, body):
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.id:
            headers["mcp-session-id"] = self.id
            headers["mcp-protocol-version"] = PROTOCOL
        try:
            async with self.client.stream("POST", self.url, json=body, headers=headers) as response:
                if response.status_code == 202:
                    return response, []
                if response.status_code != 200:
                    text = (await response.aread()).decode(errors="replace").strip()
                    raise Failed("HTTP %d: %s" % (response.status_code, text[:200]))
                if response.headers.get("content-type", "").startswith("application/json"):
                    return response, [json.loads(await response.aread())]
                messages = []
                async for line in response.aiter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        message = json.loads(line[5:])
                        messages.append(message)
                        if "id" in message and message["id"] == body.get("id"):
                            break
                return response, messages
        except httpx.HTTPError as error:
            raise Failed("%s: %s" % (type(error).__name__, error or "the connection ended")) from error


class Replica:
    def __init__(self, name, process, url, home):
        self.name, self.process, self.url, self.home = name, process, url, home
        self.base = url.rsplit("/mcp", 1)[0]

    async def get(self, path):
        """(status, body) of GET `path` on the replica itself, not through the balancer; status
        None when nothing answers."""

        def get():
            try:
                with urllib.request.urlopen(self.base + path, timeout=5) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode()
            except OSError as error:
                return None, str(error)

        return await anyio.to_thread.run_sync(get)

    async def in_flight(self):
        _, text = await self.get("/metrics")
        for line in text.splitlines():
            if line.startswith("code_runtime_runs_in_flight "):
                return int(float(line.split()[1]))
        return 0


async def start_replica(name, config, scratch, shared):
    home = os.path.join(scratch, "home-" + name)
    os.makedirs(home)
    # A home of its own: no replica finds another's kept key or cache, as on other machines.
    env = {**os.environ, "HOME": home, "XDG_CACHE_HOME": os.path.join(home, ".cache")}
    env.pop("CODE_RUNTIME_CHECKPOINT_KEY", None)
    # Its log goes to a file, read for the address it announces: a pipe no one drains would
    # stop the replica once full.
    log = os.path.join(scratch, "replica-%s.log" % name)
    with open(log, "wb") as stderr:
        process = await anyio.open_process(
            [BINARY, "mcp", "--config", config, "--http", "127.0.0.1:0",
             "--checkpoint-key", shared["key"], "--spent-checkpoints", shared["spent"]],
            stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    with anyio.fail_after(60):
        while True:
            with open(log, errors="replace") as file:
                text = file.read()
            if "serving MCP on " in text:
                url = text.split("serving MCP on ", 1)[1].split()[0]
                return Replica(name, process, url, home)
            if process.returncode is not None:
                raise Failed("replica %s ended before serving: %s" % (name, text))
            await anyio.sleep(0.05)


def haproxy_config(port, replicas):
    servers = "\n".join(
        "  server %s %s check" % (replica.name, replica.base.split("://", 1)[1]) for replica in replicas)
    return """global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
frontend mcp
  bind 127.0.0.1:%d
  default_backend replicas
backend replicas
  balance roundrobin
  # A session lives on the replica that opened it: learnt from the answer to initialize.
  stick-table type string len 64 size 100k expire 30m
  stick match req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
  # A replica on loopback checks the Host header, as the MCP spec asks against DNS rebinding.
  option httpchk
  http-check send meth GET uri /healthz ver HTTP/1.1 hdr host localhost
  http-check expect status 200
  # Three missed checks, each given 5 s, before a replica is out: a busy replica answers late,
  # and a session on one marked out would be lost.
  timeout check 5s
  default-server inter 500ms fall 3 rise 2
  http-response set-header X-Replica %%[srv_name]
%s
""" % (port, servers)


def haproxy_binary():
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None)
    if not found:
        sys.exit("FAILED: haproxy is not installed: the replica test needs it (apt-get install haproxy; .ci/run does)")
    return found


async def sessions_on_each(client, url, replicas, per_replica):
    """Opens sessions until each replica holds `per_replica` of them; returns them by replica."""
    by_replica = {replica.name: [] for replica in replicas}
    for _ in range(per_replica * len(replicas) * 4):
        session = await Session(client, url).open()
        if len(by_replica.get(session.replica, [None] * per_replica)) < per_replica:
            by_replica[session.replica].append(session)
        if all(len(held) == per_replica for held in by_replica.values()):
            return by_replica
    raise Failed("the balancer did not spread sessions: %r" % {name: len(held) for name, held in by_replica.items()})


async def paused_on_one_resumed_on_another(client, url):
    first = await Session(client, url).open()
    is_error, result, paused_on = await first.run(PAUSING)
    pending = result.get("paused", {}).get("pending")
    check(not is_error and pending and pending[0]["args"] == {"a": 1, "b": 10},
          "(a) a run pauses on replica %s at the call that needs approval" % paused_on, result)
    checkpoint = result["paused"]["checkpoint"]
    second = await Session(client, url).open()
    while second.replica == paused_on:
        second = await Session(client, url).open()
    is_error, again, resumed_on = await second.tool("resume_run", {"checkpoint": checkpoint, "allow": [pending[0]["id"]]})
    next_pending = again.get("paused", {}).get("pending", [{}])[0]
    check(not is_error and resumed_on != paused_on and next_pending.get("args") == {"a": 2, "b": 10},
          "(a) replica %s resumes it and it pauses at the next call" % resumed_on, again)
    third = await Session(client, url).open()
    while third.replica in (paused_on, resumed_on):
        third = await Session(client, url).open()
    is_error, refused, _ = await third.tool("resume_run", {"checkpoint": checkpoint, "allow": [pending[0]["id"]]})
    check(is_error and "resumed already" in json.dumps(refused),
          "(a) replica %s refuses the same checkpoint again: the spent directory is shared" % third.replica, refused)
    is_error, final, finished_on = await third.tool("resume_run", {"checkpoint": again["paused"]["checkpoint"],
                                                                   "allow": [next_pending["id"]]})
    check(not is_error and final.get("value") == ["The sum of 1 and 10 is 11.", "The sum of 2 and 10 is 12."],
          "(a) replica %s resumes the next checkpoint to the exact result" % finished_on, final)


async def calls(sessions, count, ms, outcomes):
    """`count` runs spread over `sessions`, half TypeScript and half Python, all at once;
    appends (session's replica, ok, what came back) to `outcomes`."""

    async def one(number):
        session = sessions[number % len(sessions)]
        language = "typescript" if number % 2 == 0 else "python"
        try:
            is_error, result, _ = await session.run(holding(language, ms), language)
            ok = not is_error and result.get("value") == "ok"
            outcomes.append((session.replica, ok, result))
        except Failed as error:
            outcomes.append((session.replica, False, str(error)))

    async with anyio.create_task_group() as group:
        for number in range(count):
            group.start_soon(one, number)


async def thousand_calls(client, url, replicas):
    by_replica = await sessions_on_each(client, url, replicas, 4)
    sessions = [session for held in by_replica.values() for session in held]
    outcomes = []
    started = time.monotonic()
    with anyio.fail_after(STEP_SECONDS):
        await calls(sessions, 1000, 50, outcomes)
    served = {name: sum(1 for outcome in outcomes if outcome[0] == name and outcome[1]) for name in by_replica}
    failures = [outcome for outcome in outcomes if not outcome[1]]
    check(len(outcomes) == 1000 and not failures and all(served.values()),
          "(b) 1 000 run_code calls over %d sessions all answered in %.1f s, served %s"
          % (len(sessions), time.monotonic() - started, served), failures[:3])


async def under_load_when(client, url, replicas, victim, act):
    """Load on every replica; once every run of the victim's sessions is in flight,
    `act(victim)`. Returns the outcomes, by whether their session lived on the victim."""
    by_replica = await sessions_on_each(client, url, replicas, 2)
    sessions = [session for held in by_replica.values() for session in held]
    count = 10 * len(replicas)
    on_victim = sum(1 for number in range(count) if sessions[number % len(sessions)].replica == victim.name)
    outcomes = []

    async def act_once_busy():
        while await victim.in_flight() < on_victim:
            await anyio.sleep(0.05)
        await act(victim)

    with anyio.fail_after(STEP_SECONDS):
        async with anyio.create_task_group() as group:
            group.start_soon(act_once_busy)
            # Each run holds its replica for 4 s: the act comes while they all run.
            await calls(sessions, count, 4000, outcomes)
    victims = [outcome for outcome in outcomes if outcome[0] == victim.name]
    others = [outcome for outcome in outcomes if outcome[0] != victim.name]
    return victims, others


async def drained(client, url, replicas, victim):
    unready = {}

    async def terminate(replica):
        replica.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            status, _ = await replica.get("/healthz")
            if status != 200:
                unready["status"] = status
                return
            await anyio.sleep(0.02)

    victims, others = await under_load_when(client, url, replicas, victim, terminate)
    with anyio.fail_after(60):
        code = await victim.process.wait()
    check(unready.get("status") == 503, "(d) SIGTERM turns replica %s unready (/healthz 503)" % victim.name, unready)
    lost = [outcome for outcome in victims + others if not outcome[1]]
    check(victims and not lost and code == 0,
          "(d) it finishes its %d runs and exits 0; the other replicas' %d runs complete; none lost"
          % (len(victims), len(others)), (code, lost[:3]))


async def killed(client, url, replicas, victim):
    async def kill(replica):
        replica.process.send_signal(signal.SIGKILL)

    started = time.monotonic()
    victims, others = await under_load_when(client, url, replicas, victim, kill)
    seconds = time.monotonic() - started
    failed = [outcome for outcome in victims if not outcome[1]]
    check(victims and len(failed) == len(victims) and all(outcome[2] for outcome in failed),
          "(c) SIGKILL on replica %s: each of its %d runs fails with an error, e.g. %r"
          % (victim.name, len(victims), failed[0][2] if failed else None), victims[:3])
    check(others and all(outcome[1] for outcome in others),
          "(c) the other replicas' %d runs complete, and nothing hangs (%.1f s in all)" % (len(others), seconds),
          [outcome for outcome in others if not outcome[1]][:3])


async def main():
    scratch = peers.scratch_dir()
    everything = {"command": peers.everything_command(), "approval": ["get-s*"]}
    config = peers.write_config(scratch, {"everything": everything}, extra={"approvalFallback": "pause"})
    key = os.path.join(scratch, "checkpoint.key")
    # Readable by this user alone: the gateway refuses a key others can read.
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        file.write(KEY)
    shared = {"key": key, "spent": os.path.join(scratch, "spent")}
    replicas, balancer = [], None
    try:
        with anyio.fail_after(STEP_SECONDS):
            for name in ("a", "b", "c"):
                replicas.append(await start_replica(name, config, scratch, shared))
        port = peers.free_port()
        haproxy_cfg = os.path.join(scratch, "haproxy.cfg")
        with open(haproxy_cfg, "w") as file:
            file.write(haproxy_config(port, replicas))
        with open(os.path.join(scratch, "haproxy.log"), "wb") as log:
            balancer = subprocess.Popen([haproxy_binary(), "-f", haproxy_cfg, "-db"],
                                        stdout=subprocess.DEVNULL, stderr=log)
        peers.wait_for_port(port)
        url = "http://127.0.0.1:%d/mcp" % port
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        async with httpx.AsyncClient(timeout=httpx.Timeout(90, connect=5), limits=limits) as client:
            await anyio.sleep(2)  # two health checks passed: every replica is up
            with anyio.fail_after(STEP_SECONDS):
                await paused_on_one_resumed_on_another(client, url)
            await thousand_calls(client, url, replicas)
            await drained(client, url, replicas, replicas[1])
            await anyio.sleep(3)  # the balancer saw it go (three failed checks)
            await killed(client, url, [replicas[0], replicas[2]], replicas[2])
    finally:
        if balancer is not None:
            balancer.terminate()
            balancer.wait(10)
        for replica in replicas:
            if replica.process.returncode is None:
                replica.process.terminate()
                with anyio.move_on_after(20):
                    await replica.process.wait()
            if replica.process.returncode is None:
                replica.process.kill()
                await replica.process.wait()
    print("all replica checks passed")


anyio.run(main)

"""`code-runtime mcp` against a hostile program and careless configs, driven by the official
Python SDK: `python hostile.py BINARY`. Exits non-zero on the first failed check.

- An upstream command server gets only what its config names (and a small safe set of ours):
  never the checkpoint key, nor any other variable of the gateway's.
- When an HTTP upstream whose URL carries credentials (path, query) fails, the program's error
  names the server and shows none of them.
- The record of a server rotates: one run cannot fill it for every later run, and both files
  are readable by their owner only."""

import json
import os
import stat
import subprocess
import sys

import anyio

import peers
from peers import check

BINARY = sys.argv[1]
HERE = os.path.dirname(__file__)
SECRETS = [sys.executable, os.path.join(HERE, "secrets_server.py")]
KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


def value(result):
    """The run's value; the SDK's server wraps a tool's plain return value as {"result": ..}."""
    check(not result.is_error, "run_code answered", result.content[0].text)
    answer = json.loads(result.content[0].text)
    got = answer.get("value")
    if isinstance(got, dict) and set(got) == {"result"}:
        answer["value"] = got["result"]
    return answer


async def environment(scratch):
    config = peers.write_config(scratch, {"secrets": {"command": SECRETS, "env": {"MINE": "given"}, "approval": "none"}})
    env = {"CODE_RUNTIME_CHECKPOINT_KEY": KEY, "GATEWAY_ONLY_SECRET": "s3cr3t-of-the-gateway"}
    async with peers.session(BINARY, config, "stdio", env=env) as client:
        seen = value(await client.call_tool("run_code", {"code": "return await secrets.environment()"}))["value"]
        text = json.dumps(seen)
        check("CODE_RUNTIME_CHECKPOINT_KEY" not in seen and KEY not in text, "the checkpoint key never reaches an upstream", sorted(seen))
        check("GATEWAY_ONLY_SECRET" not in seen and "s3cr3t" not in text, "nor any variable of ours the config does not name", sorted(seen))
        check(seen.get("MINE") == "given" and "PATH" in seen, "the config's env and PATH do", sorted(seen))
    named = peers.write_config(scratch, {"secrets": {"command": SECRETS, "env": {"K": "${CODE_RUNTIME_CHECKPOINT_KEY}"}}})
    output = subprocess.run([BINARY, "mcp", "--config", named], env={**os.environ, **env},
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    check(output.returncode == 2 and "is the checkpoint key" in output.stderr and KEY not in output.stderr,
          "a config that names the key is refused", (output.returncode, output.stderr))


async def url_secrets(scratch):
    port = peers.free_port()
    path = "/s/TOKEN-SECRET-1234/mcp"
    upstream = subprocess.Popen([*SECRETS, "http", str(port), path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d%s?api_key=KEY-SECRET-5678" % (port, path)
    config = peers.write_config(scratch, {"remote": {"url": url, "approval": "none"}})
    try:
        peers.wait_for_port(port)
        async with peers.session(BINARY, config, "stdio") as client:
            echoed = value(await client.call_tool("run_code", {"code": "return await remote.echo({ text: 'hi' })"}))
            check(echoed["value"] == "hi", "the upstream at a URL with credentials answers", echoed)
            upstream.terminate()
            upstream.wait(10)
            failed = await client.call_tool("run_code", {"code": """
try { return await remote.echo({ text: 'again' }); } catch (e) { return 'caught: ' + e.message; }"""})
            text = failed.content[0].text
            check("caught:" in text and "remote" in text, "a failed upstream rejects naming the server", text)
            check("TOKEN-SECRET" not in text and "KEY-SECRET" not in text, "and shows none of its URL's secrets", text)
    finally:
        upstream.kill()
        upstream.wait(10)


async def record(scratch):
    config = peers.write_config(scratch, {"secrets": {"command": SECRETS, "approval": "none"}})
    path = os.path.join(scratch, "calls.jsonl")
    extra = ["--record", path, "--record-max-bytes", "2000"]
    async with peers.session(BINARY, config, "stdio", extra=extra) as client:
        first = value(await client.call_tool("run_code", {"code": "return await secrets.echo({ text: 'first' })"}))
        check(first["value"] == "first", "an earlier run is recorded", first)
        # One run writes far more than the bound: it may make the record rotate once, and its
        # call that would make it rotate again (erasing the earlier run's line) ends it.
        greedy = await client.call_tool("run_code", {"code": """
for (let i = 0; i < 60; i++) await secrets.echo({ text: 'x'.repeat(100) });
return 'done'"""})
        ended = json.loads(greedy.content[0].text)
        check(greedy.is_error and ended["error"]["kind"] == "output-limit" and "reached its bound of 2000 bytes" in ended["error"]["message"],
              "a run whose calls would rotate the record twice ends as output-limit", ended)
        check("first" in open(path + ".1").read(), "and the earlier run's line is still recorded", open(path + ".1").read()[:300])
        # Every later run of every client is still served and recorded.
        for n in range(3):
            later = value(await client.call_tool("run_code", {"code": "return await secrets.echo({ text: 'later-%d' })" % n}))
            check(later["value"] == "later-%d" % n, "a later run is served", later)
    current, aside = open(path).read(), open(path + ".1").read()
    check(len(current) <= 2000 and len(aside) <= 2000, "the record holds to its bound, in two files", (len(current), len(aside)))
    check("later-2" in current, "the latest calls are recorded", current[-300:])
    for file in (path, path + ".1"):
        mode = stat.S_IMODE(os.stat(file).st_mode)
        check(mode == 0o600, "%s is its owner's only" % os.path.basename(file), oct(mode))


async def main():
    scratch = peers.scratch_dir()
    await environment(scratch)
    await url_secrets(scratch)
    await record(scratch)
    print("all hostile checks passed")


anyio.run(main)

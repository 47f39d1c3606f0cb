"""`code-runtime mcp` in front of a remote server that wants OAuth (`"oauth": true`), driven by
the official Python MCP SDK over stdio: `python authorization.py BINARY`. The server
(`authorizing_server.py`) is its own authorization server; `browser.py` stands in for the user's
browser. Checks the first authorization (registration, PKCE, the code back on the loopback), the
token file (mode 0600 in a 0700 directory, naming its server, never shown), a silent refresh
when the server stops taking the token, the token reused by the next start, a new authorization
when even the refresh token is refused, the URL printed on stderr when there is no `$BROWSER`,
forged answers on the loopback ignored, and a user who refuses (one misuse line). Exits non-zero
on the first failed check. Run by code-runtime-cli/tests/it/mcp.rs."""

import contextlib
import glob
import json
import os
import stat
import subprocess
import sys
import time
import urllib.request

import anyio

import peers
from peers import check

BINARY = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
BROWSER = "%s %s" % (sys.executable, os.path.join(HERE, "browser.py"))
CALL = "return await remote.whoami({})"


@contextlib.contextmanager
def authorizing_server():
    """authorizing_server.py on a free port; yields its origin."""
    port = peers.free_port()
    process = subprocess.Popen([sys.executable, os.path.join(HERE, "authorizing_server.py"), str(port)])
    try:
        peers.wait_for_port(port)
        yield "http://127.0.0.1:%d" % port
    finally:
        process.terminate()
        process.wait(10)


def fetch(url, data=None):
    with urllib.request.urlopen(url, data=data, timeout=10) as response:
        return json.loads(response.read() or b"{}")


async def whoami(config, env):
    async with peers.session(BINARY, config, "stdio", env=env) as client:
        result = await client.call_tool("run_code", {"code": CALL})
        value = json.loads(result.content[0].text)
        check(not result.is_error and value.get("value", {}).get("authorized"), "the call reached the server", value)
        return value["value"]["grant"]


def start_and_fail(config, env):
    """Starts the gateway, which should refuse to serve; its exit code and stderr."""
    process = subprocess.run([BINARY, "mcp", "--config", config], env={**os.environ, **env},
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    return process.returncode, process.stderr.decode()


def print_only_start(config, env):
    """Starts the gateway without `$BROWSER`: the authorization URL is printed on stderr; this
    opens it as the user would, then ends the gateway. Its stderr."""
    process = subprocess.Popen([BINARY, "mcp", "--config", config], env={**os.environ, **env},
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = b""
    deadline = time.monotonic() + 60
    while b"open http" not in seen and time.monotonic() < deadline:
        seen += process.stderr.readline()
    line = seen.decode().splitlines()[-1]
    url = line.split("open ", 1)[1].strip()
    with urllib.request.urlopen(url, timeout=10) as page:
        page.read()
    time.sleep(1)
    process.stdin.close()
    seen += process.stderr.read()
    process.wait(30)
    return seen.decode()


async def main():
    scratch = peers.scratch_dir()
    cache = os.path.join(scratch, "cache")
    log = os.path.join(scratch, "browser.log")
    env = {"XDG_CACHE_HOME": cache, "BROWSER": BROWSER, "BROWSER_LOG": log, "BROWSER_FORGE": "1"}
    with authorizing_server() as origin:
        stats = lambda: fetch(origin + "/control/stats")
        servers = {"remote": {"type": "http", "url": origin + "/mcp", "oauth": True, "approval": "none"}}
        config = peers.write_config(scratch, {}, languages=["typescript"], extra={"mcpServers": servers})

        first = await whoami(config, env)
        seen = stats()
        check((seen["registrations"], seen["authorize"], seen["code"]) == (1, 1, 1),
              "the first start registered, and authorized once", seen)
        check(seen["problems"] == [], "with PKCE (S256), the resource indicator, one use of the code", seen)
        opened = open(log).read().split()
        check(len(opened) == 1 and opened[0].startswith(origin + "/authorize?"), "$BROWSER opened the URL", opened)
        files = glob.glob(os.path.join(cache, "code-runtime", "oauth", "*.json"))
        check(len(files) == 1, "one token file under $XDG_CACHE_HOME/code-runtime/oauth", files)
        mode = lambda path: stat.S_IMODE(os.stat(path).st_mode)
        check(mode(files[0]) == 0o600 and mode(os.path.dirname(files[0])) == 0o700,
              "the token file is 0600, its directory 0700", (oct(mode(files[0])), oct(mode(os.path.dirname(files[0])))))
        kept = json.load(open(files[0]))
        check(kept["url"] == origin + "/mcp" and kept["credentials"]["token_response"]["refresh_token"],
              "it names its server and keeps the refresh token")

        fetch(origin + "/control/revoke", b"")
        again = await whoami(config, env)
        seen = stats()
        check(again == first and seen["refresh"] == 1 and seen["authorize"] == 1,
              "a token the server stops taking is refreshed, without asking the user", seen)

        await whoami(config, env)
        seen = stats()
        check(seen["authorize"] == 1 and seen["registrations"] == 1, "the next start takes the kept token", seen)

        fetch(origin + "/control/revoke?refresh=1", b"")
        renewed = await whoami(config, env)
        seen = stats()
        check(seen["authorize"] == 2 and renewed != first, "a refused refresh token authorizes again", seen)

        quiet = {"XDG_CACHE_HOME": os.path.join(scratch, "cache-2"), "BROWSER": ""}
        stderr = print_only_start(config, quiet)
        check('upstream server "remote" needs authorization: open ' + origin + "/authorize?" in stderr,
              "without $BROWSER the URL is printed on stderr", stderr)
        check(glob.glob(os.path.join(scratch, "cache-2", "code-runtime", "oauth", "*.json")),
              "and the user who opened it is authorized")
        check("at-" not in stderr and "rt-" not in stderr, "no token is shown on stderr", stderr)

        refused = {"XDG_CACHE_HOME": os.path.join(scratch, "cache-3"), "BROWSER": BROWSER, "BROWSER_REFUSE": "1"}
        code, stderr = start_and_fail(config, refused)
        lines = stderr.strip().splitlines()
        check(code == 2 and 'upstream server "remote"' in lines[-1] and "access_denied" in lines[-1]
              and "the user said no" in lines[-1], "a user who refuses is one misuse line naming the server", stderr)
        check(stats()["problems"] == [], "no problem seen by the server", stats())
    print("all authorization checks passed")


anyio.run(main)

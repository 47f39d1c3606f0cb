"""The MCP peers of the `code-runtime mcp` tests and benchmark: the pinned reference servers from
npm (mcp-peers/), and `code-runtime mcp` itself, reached with the official Python SDK over stdio or
streamable HTTP."""

import atexit
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SERVERS = os.path.join(ROOT, "mcp-peers", "node_modules", "@modelcontextprotocol")
EVERYTHING = os.path.join(SERVERS, "server-everything", "dist", "index.js")
MEMORY = os.path.join(SERVERS, "server-memory", "dist", "index.js")


def node():
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, "node")
        if os.access(candidate, os.X_OK):
            return candidate
    sys.exit("node is not on PATH: the MCP tests need the reference servers (mcp-peers/)")


def everything_command():
    return [node(), EVERYTHING, "stdio"]


def memory_command(scratch):
    # The memory server writes its graph next to its code unless told where.
    return [node(), MEMORY], {"MEMORY_FILE_PATH": os.path.join(scratch, "memory.jsonl")}


def check(condition, what, seen=None):
    """Prints `ok: what`, or exits non-zero with `FAILED: what` (and what was `seen`)."""
    if not condition:
        sys.exit("FAILED: %s%s" % (what, "" if seen is None else "\n  seen: %r" % (seen,)))
    print("ok:", what)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port, seconds=20):
    """Returns once something listens on 127.0.0.1:`port`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
            return
        time.sleep(0.05)
    raise RuntimeError("nothing listens on port %d" % port)


@contextlib.contextmanager
def everything_over_http():
    """server-everything in its streamable HTTP mode, on a free port; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [node(), EVERYTHING, "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield "http://127.0.0.1:%d/mcp" % port
    finally:
        process.terminate()
        process.wait(10)


def write_config(scratch, servers, limits=None, languages=None, extra=None):
    config = {"servers": servers, **(extra or {})}
    if limits:
        config["limits"] = limits
    if languages:
        config["languages"] = languages
    path = os.path.join(scratch, "config-%d.json" % len(os.listdir(scratch)))
    with open(path, "w") as file:
        json.dump(config, file)
    return path


@contextlib.asynccontextmanager
async def session(binary, config, transport, logs=None, extra=(), elicitation=None, env=None, sampling=None):
    """A `ClientSession` with `code-runtime mcp --config CONFIG [EXTRA...]`, over `transport`
    ("stdio" or "http"). Log notifications are appended to `logs`; `elicitation`, when given, is
    the client's elicitation callback (the client then declares the capability), `sampling` its
    sampling callback (likewise); `env` adds to the server's environment (stdio)."""

    async def on_log(params):
        if logs is not None:
            logs.append(params.data)

    callbacks = {"logging_callback": on_log}
    if elicitation is not None:
        callbacks["elicitation_callback"] = elicitation
    if sampling is not None:
        callbacks["sampling_callback"] = sampling
    if transport == "stdio":
        params = StdioServerParameters(
            command=binary,
            args=["mcp", "--config", config, *extra],
            env={**os.environ, **env} if env else None,
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **callbacks) as client:
                await client.initialize()
                yield client
        return
    process = await anyio.open_process(
        [binary, "mcp", "--config", config, "--http", "127.0.0.1:0", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = await _announced_url(process)
        async with streamable_http_client(url) as (read, write, *_):
            async with ClientSession(read, write, **callbacks) as client:
                await client.initialize()
                yield client
    finally:
        process.terminate()
        with anyio.move_on_after(20):
            await process.wait()


async def _announced_url(process):
    # The server says `code-runtime: serving MCP on http://ADDR/mcp` on stderr once it listens.
    seen = b""
    with anyio.fail_after(60):
        async for chunk in process.stderr:
            seen += chunk
            for line in seen.decode(errors="replace").splitlines():
                if "serving MCP on " in line:
                    return line.split("serving MCP on ", 1)[1].strip()
    raise RuntimeError("code-runtime mcp did not announce its address: %r" % seen)


@contextlib.asynccontextmanager
async def direct(command, env=None):
    """A `ClientSession` straight to an upstream server over stdio."""
    params = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, **(env or {})})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            yield client


def scratch_dir():
    """A directory of the suite's own, removed as the suite's process exits."""
    path = tempfile.mkdtemp(prefix="code-runtime-mcp-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path

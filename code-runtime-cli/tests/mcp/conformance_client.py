"""The client the MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
mcp-peers/) drives for its client scenarios: `python conformance_client.py BINARY URL`, with the
scenario in `$MCP_CONFORMANCE_SCENARIO`. The client under test is `code-runtime mcp`: it is
configured with the scenario's server at URL as its upstream `s`, and a program run through it
calls what the scenario expects to be called. Its own client is the official Python SDK, which
answers elicitation with the schema's defaults (the SEP-1034 scenario checks they arrive).
Exits non-zero when the run fails."""

import json
import os
import sys

import anyio
from mcp import types

import peers

BINARY, URL = sys.argv[1], sys.argv[-1]

# What each scenario expects the client to do, as a program.
PROGRAMS = {
    "initialize": "return Object.keys(s).length >= 0",
    "tools_call": "return await s.add_numbers({ a: 2, b: 3 })",
    "sse-retry": "return await s.test_reconnection({})",
    "elicitation-sep1034-client-defaults": "return await s.test_client_elicitation_defaults({})",
}


async def elicitation(context, params):
    """Accepts with every default the requested schema gives."""
    properties = params.requested_schema.get("properties", {})
    content = {name: spec["default"] for name, spec in properties.items() if "default" in spec}
    return types.ElicitResult(action="accept", content=content)


async def main():
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    program = PROGRAMS.get(scenario)
    if program is None:
        sys.exit("no program for scenario %r" % scenario)
    scratch = peers.scratch_dir()
    config = peers.write_config(scratch, {"s": {"url": URL, "approval": "none", "timeoutMs": 20000}},
                                languages=["typescript"])
    async with peers.session(BINARY, config, "stdio", elicitation=elicitation) as client:
        result = await client.call_tool("run_code", {"code": program})
        text = result.content[0].text
        print(text)
        if result.is_error:
            sys.exit("the run failed: " + text)
        value = json.loads(text)
        if "error" in value:
            sys.exit("the program failed: " + text)


anyio.run(main)

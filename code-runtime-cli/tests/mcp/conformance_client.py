"""The client the MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
mcp-peers/) drives for its client scenarios: `python conformance_client.py BINARY URL`, with the
scenario in `$MCP_CONFORMANCE_SCENARIO`. The client under test is `code-runtime mcp`: it is
configured with the scenario's server at URL as its upstream `s`, and a program run through it
calls what the scenario expects to be called. Its own client is the official Python SDK, which
answers elicitation with the schema's defaults (the SEP-1034 scenario checks they arrive).
For the `auth/*` scenarios the upstream is configured with `"oauth"` (a client id and secret or
key from the scenario's `$MCP_CONFORMANCE_CONTEXT` when it gives them), tokens are kept in a
fresh cache directory, and `browser.py` stands in for the user's browser (`$BROWSER`): it opens
the authorization URL and follows the redirect back to `code-runtime mcp`. Exits non-zero when
the run fails."""

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


# An auth scenario's server has one tool, `test-tool`: the program calls every tool it offers.
CALL_EVERY_TOOL = """
const answers = {};
for (const name of Object.keys(s)) answers[name] = await s[name]({});
return answers;
"""

# The client id metadata document the `basic-cimd` scenario expects as the client id.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def oauth(scenario, scratch):
    """The `"oauth"` of the upstream for an `auth/*` scenario, from the context it gives."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario.startswith("auth/client-credentials"):
        config = {"grant": "client_credentials", "clientId": context["client_id"]}
        if "private_key_pem" in context:
            key = os.path.join(scratch, "client-key.pem")
            with open(key, "w") as file:
                file.write(context["private_key_pem"])
            config["privateKeyFile"] = key
            config["signingAlgorithm"] = context.get("signing_algorithm", "ES256")
        else:
            config["clientSecret"] = context["client_secret"]
        return config
    if "client_id" in context:
        return {"clientId": context["client_id"], "clientSecret": context["client_secret"]}
    return {"clientMetadataUrl": CLIENT_METADATA_URL}


async def elicitation(context, params):
    """Accepts with every default the requested schema gives."""
    properties = params.requested_schema.get("properties", {})
    content = {name: spec["default"] for name, spec in properties.items() if "default" in spec}
    return types.ElicitResult(action="accept", content=content)


async def main():
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    program = CALL_EVERY_TOOL if scenario.startswith("auth/") else PROGRAMS.get(scenario)
    if program is None:
        sys.exit("no program for scenario %r" % scenario)
    scratch = peers.scratch_dir()
    server = {"url": URL, "approval": "none", "timeoutMs": 20000}
    env = None
    if scenario.startswith("auth/"):
        server["oauth"] = oauth(scenario, scratch)
        browser = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser.py")
        env = {"BROWSER": "%s %s" % (sys.executable, browser), "XDG_CACHE_HOME": scratch}
    config = peers.write_config(scratch, {"s": server}, languages=["typescript"])
    async with peers.session(BINARY, config, "stdio", elicitation=elicitation, env=env) as client:
        result = await client.call_tool("run_code", {"code": program})
        text = result.content[0].text
        print(text)
        if result.is_error:
            sys.exit("the run failed: " + text)
        value = json.loads(text)
        if "error" in value:
            sys.exit("the program failed: " + text)


anyio.run(main)

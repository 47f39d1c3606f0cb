"""A hostile upstream MCP server, speaking raw JSON-RPC over stdio: `deep` answers with a result
nested 100 000 levels, `garbage` with a line that is not JSON, `silent` never answers, `ok`
answers. A program's calls to the first three must reject within the server's `timeoutMs`,
never hang the run, and `ok` must still work after them. `deep_text` answers with a text that
is a 100 000-deep JSON value followed by garbage, `deep_value` with the value alone: the host
parses such text without recursion (a string and a deep value)."""

import json
import sys


def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def result(ident, value):
    send(json.dumps({"jsonrpc": "2.0", "id": ident, "result": value}))


TOOLS = [{"name": name, "inputSchema": {"type": "object"}}
         for name in ("deep", "garbage", "silent", "ok", "deep_text", "deep_value")]

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    ident, method = message["id"], message["method"]
    if method == "initialize":
        result(ident, {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "garbled", "version": "1"},
        })
    elif method == "tools/list":
        result(ident, {"tools": TOOLS})
    elif method == "tools/call":
        name = message["params"]["name"]
        if name == "deep":
            levels = 100000
            send('{"jsonrpc":"2.0","id":%s,"result":{"content":[],"structuredContent":{"v":%s%s}}}'
                 % (json.dumps(ident), "[" * levels, "]" * levels))
        elif name == "garbage":
            send("this is not JSON {")
        elif name == "ok":
            result(ident, {"content": [{"type": "text", "text": "fine"}]})
        elif name in ("deep_text", "deep_value"):
            levels = 100000
            text = "[" * levels + "]" * levels + (" x" if name == "deep_text" else "")
            result(ident, {"content": [{"type": "text", "text": text}]})
    else:
        send(json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}}))

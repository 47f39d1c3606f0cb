"""An upstream MCP server (built on the official SDK) that shows what it was given: `environment`
returns its environment, `echo` its argument. Over stdio by default; `secrets_server.py http PORT
PATH` serves streamable HTTP at PATH (a path that carries a credential, as some hosted servers'
URLs do)."""

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("secrets")


@server.tool()
def environment() -> dict:
    """The server's environment."""
    return dict(os.environ)


@server.tool()
def echo(text: str) -> str:
    """Its argument."""
    return text


def at(path, app):
    """`app` (served at /mcp) served at `path` instead; any other path is not found."""

    async def asgi(scope, receive, send):
        if scope["type"] == "http":
            if scope["path"] != path:
                await send({"type": "http.response.start", "status": 404, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            scope = dict(scope, path="/mcp")
        await app(scope, receive, send)

    return asgi


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import uvicorn

        port, path = int(sys.argv[2]), sys.argv[3]
        uvicorn.run(at(path, server.streamable_http_app()), host="127.0.0.1", port=port, log_level="warning")
    else:
        server.run()

"""An upstream MCP server over streamable HTTP that answers only requests carrying
`Authorization: Bearer $GUARD_EXPECT_TOKEN` (401 otherwise), as remote servers behind a token do:
`python guarded_server.py PORT [CERT KEY]` (over https with CERT and KEY). Its `whoami` tool says which `X-Team` header the caller sent."""

import os
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("guarded")
seen = {"team": None}


@server.tool()
def whoami() -> dict:
    """The X-Team header of the request, and that the token was right (no request gets here
    without it)."""
    return {"team": seen["team"], "authorized": True}


@server.resource("guarded://motd", name="motd", description="The message of the day.")
def motd() -> str:
    return "all systems nominal"


@server.resource("guarded://users/{name}", name="user")
def user(name: str) -> str:
    return "the profile of " + name


@server.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return "Say hello to %s, warmly." % name


def guarded(app):
    expected = ("Bearer " + os.environ["GUARD_EXPECT_TOKEN"]).encode()

    async def asgi(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != expected:
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
            team = headers.get(b"x-team")
            seen["team"] = team.decode() if team is not None else None
        await app(scope, receive, send)

    return asgi


if __name__ == "__main__":
    tls = {"ssl_certfile": sys.argv[2], "ssl_keyfile": sys.argv[3]} if len(sys.argv) > 3 else {}
    uvicorn.run(guarded(server.streamable_http_app()), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                **tls)

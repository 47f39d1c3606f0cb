"""An upstream MCP server over streamable HTTP that is also its own OAuth 2.1 authorization
server, as the MCP authorization spec describes: `python authorizing_server.py PORT`.

- `/mcp` answers only a current access token (401 with `resource_metadata` otherwise);
- `/.well-known/oauth-protected-resource/mcp` names this origin as the authorization server;
- `/.well-known/oauth-authorization-server`, `/register` (dynamic registration), `/authorize`
  (grants at once: redirects with a code), `/token` (the code with its PKCE verifier, and
  refresh tokens);
- for the test: `POST /control/revoke` (every access token stops working; with `?refresh=1`
  every refresh token too), `GET /control/stats` (how many of each it saw, and every problem:
  a code used twice, a verifier that does not match, a token request without `resource`).

Its `whoami` tool answers which grant the caller's token came from."""

import base64
import hashlib
import itertools
import json
import sys
import urllib.parse

import uvicorn
from mcp.server.mcpserver import MCPServer

PORT = int(sys.argv[1])
BASE = "http://127.0.0.1:%d" % PORT
RESOURCE = BASE + "/mcp"
PRM = BASE + "/.well-known/oauth-protected-resource/mcp"

server = MCPServer("authorizing")
counter = itertools.count(1)
stats = {"registrations": 0, "authorize": 0, "code": 0, "refresh": 0, "problems": []}
codes = {}  # code -> (challenge, redirect_uri)
access = {}  # access token -> grant number
refresh = {}  # refresh token -> grant number
caller = {"grant": None}


@server.tool()
def whoami() -> dict:
    """Which grant the caller's access token came from."""
    return {"grant": caller["grant"], "authorized": True}


def tokens(grant):
    token, renewal = "at-%d" % next(counter), "rt-%d" % next(counter)
    access[token], refresh[renewal] = grant, grant
    return {"access_token": token, "token_type": "Bearer", "expires_in": 3600, "refresh_token": renewal}


async def reply(send, status, body=b"", headers=()):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), *headers]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive):
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def token(receive, send):
    form = dict(urllib.parse.parse_qsl((await read_body(receive)).decode()))
    if form.get("resource") != RESOURCE:
        stats["problems"].append("token request with resource %r" % form.get("resource"))
    if form.get("grant_type") == "authorization_code":
        stats["code"] += 1
        challenge, redirect_uri = codes.pop(form.get("code"), (None, None))
        verifier = form.get("code_verifier", "")
        computed = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge is None or computed != challenge or form.get("redirect_uri") != redirect_uri:
            stats["problems"].append("bad code exchange")
            return await reply(send, 400, {"error": "invalid_grant"})
        return await reply(send, 200, tokens(next(counter)))
    if form.get("grant_type") == "refresh_token":
        stats["refresh"] += 1
        grant = refresh.pop(form.get("refresh_token"), None)
        if grant is None:
            return await reply(send, 400, {"error": "invalid_grant"})
        return await reply(send, 200, tokens(grant))
    return await reply(send, 400, {"error": "unsupported_grant_type"})


async def authorize(scope, send):
    query = dict(urllib.parse.parse_qsl(scope["query_string"].decode()))
    stats["authorize"] += 1
    if query.get("code_challenge_method") != "S256" or query.get("resource") != RESOURCE:
        stats["problems"].append("authorization request %r" % query)
    code = "code-%d" % next(counter)
    codes[code] = (query.get("code_challenge"), query.get("redirect_uri"))
    target = query["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": query.get("state", "")})
    await reply(send, 302, headers=[(b"location", target.encode())])


def app(mcp):
    async def asgi(scope, receive, send):
        if scope["type"] != "http":
            return await mcp(scope, receive, send)
        path, method = scope["path"], scope["method"]
        if path == "/.well-known/oauth-protected-resource/mcp":
            return await reply(send, 200, {"resource": RESOURCE, "authorization_servers": [BASE]})
        if path == "/.well-known/oauth-authorization-server":
            return await reply(send, 200, {
                "issuer": BASE, "authorization_endpoint": BASE + "/authorize",
                "token_endpoint": BASE + "/token", "registration_endpoint": BASE + "/register",
                "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_methods_supported": ["none"]})
        if path == "/register" and method == "POST":
            stats["registrations"] += 1
            asked = json.loads(await read_body(receive))
            return await reply(send, 201, {"client_id": "client-%d" % next(counter),
                                           "redirect_uris": asked.get("redirect_uris", []),
                                           "token_endpoint_auth_method": "none"})
        if path == "/authorize":
            return await authorize(scope, send)
        if path == "/token" and method == "POST":
            return await token(receive, send)
        if path == "/control/revoke":
            access.clear()
            if b"refresh=1" in scope["query_string"]:
                refresh.clear()
            return await reply(send, 200, {})
        if path == "/control/stats":
            return await reply(send, 200, stats)
        bearer = dict(scope["headers"]).get(b"authorization", b"").decode()
        grant = access.get(bearer[len("Bearer "):]) if bearer.startswith("Bearer ") else None
        if grant is None:
            challenge = 'Bearer resource_metadata="%s"' % PRM
            return await reply(send, 401, {"error": "invalid_token"}, [(b"www-authenticate", challenge.encode())])
        caller["grant"] = grant
        await mcp(scope, receive, send)

    return asgi


if __name__ == "__main__":
    uvicorn.run(app(server.streamable_http_app()), host="127.0.0.1", port=PORT, log_level="warning")

"""`code-runtime mcp` pointed at a config as MCP clients write it (`mcpServers`), driven by the
official Python MCP SDK over stdio: `python gateway.py BINARY`. A remote server behind a bearer
token (`headers`, the token from `${VAR}`), a command server with `args` and an `env` expanded from
the environment, a disabled entry, and our own `servers` beside them. Exits non-zero on the first
failed check. Run by code-runtime-cli/tests/it/mcp.rs."""

import contextlib
import json
import os
import subprocess
import sys

import anyio

import peers
from peers import check

BINARY = sys.argv[1]
TOKEN = "s3cret-token-of-the-test"


@contextlib.contextmanager
def guarded_server(tls=()):
    """guarded_server.py on a free port (over https with `tls`, a certificate and its key);
    yields its URL."""
    port = peers.free_port()
    process = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(__file__), "guarded_server.py"), str(port), *tls],
        env={**os.environ, "GUARD_EXPECT_TOKEN": TOKEN},
    )
    try:
        peers.wait_for_port(port)
        yield "%s://127.0.0.1:%d/mcp" % ("https" if tls else "http", port)
    finally:
        process.terminate()
        process.wait(10)


def client_config(scratch, url):
    memory, _ = peers.memory_command(scratch)
    flaky = [sys.executable, os.path.join(os.path.dirname(__file__), "flaky_server.py")]
    config = {
        "mcpServers": {
            "guarded-api": {
                "type": "http",
                "url": url,
                "headers": {"Authorization": "Bearer ${GUARD_TOKEN}", "X-Team": "${GUARD_TEAM:-blue}"},
                "approval": "none",
            },
            "mem-store": {
                "command": memory[0],
                "args": memory[1:],
                "env": {"MEMORY_FILE_PATH": "${GATEWAY_SCRATCH}/graph.jsonl"},
                "approval": "none",
            },
            "off": {"command": "/nonexistent/server", "disabled": True},
        },
        "servers": {"flaky": {"command": flaky, "approval": "none"}},
        "languages": ["typescript", "python"],
    }
    path = os.path.join(scratch, "client-config.json")
    with open(path, "w") as file:
        json.dump(config, file)
    return path


PROGRAM = """
const who = await guarded_api.whoami({});
await mem_store.create_entities({ entities: [{ name: "ana", entityType: "person", observations: [] }] });
const graph = await mem_store.read_graph({});
const pong = await flaky.ping({});
return { who, entities: graph.entities.length, pong: JSON.stringify(pong).includes("pong from") };
"""


async def served(binary, config, env):
    async with peers.session(binary, config, "stdio", env=env) as client:
        tools = await client.list_tools()
        description = next(tool.description for tool in tools.tools if tool.name == "run_code")
        check("guarded_api" in description and "mem_store" in description and "flaky" in description
              and "off." not in description,
              "client names become namespaces; a disabled server is not offered", description[:400])
        result = await client.call_tool("run_code", {"code": PROGRAM})
        value = json.loads(result.content[0].text)
        check(not result.is_error, "a run calls all three servers", value)
        shown = json.dumps(value["value"])
        check('"blue"' in shown and "authorized" in shown,
              "the remote server got the token and the default of ${GUARD_TEAM:-blue}", value)
        check(value["value"]["entities"] == 1 and value["value"]["pong"] is True, "memory and flaky answer", value)
        check("tokens comes back shrunk" in description, "run_code tells the model results are shrunk", description[:800])
        big = await client.call_tool("run_code", {
            "code": "return Array.from({ length: 3000 }, (_, i) => ({ i, text: 'word '.repeat(20) }))",
        })
        text = big.content[0].text
        value = json.loads(text)
        check(not big.is_error and value["truncated"]["fromBytes"] > 300_000
              and value["truncated"]["toBytes"] <= 24_000 and len(text.encode()) < 25_000
              and value["value"][-1].endswith(" more items"),
              "a 300 KB result comes back shrunk to the default 6 000 tokens, marked", text[-300:])
        deep = await client.call_tool("run_code", {
            "code": "let v = null; for (let i = 0; i < 30000; i++) v = [v]; return v;",
        })
        deep_text = deep.content[0].text
        check(not deep.is_error and deep_text.startswith('{"logs":[],"value":[[[[') and "…[truncated " in deep_text
              and len(deep_text.encode()) < 25_000,
              "a 30 000-deep result over the budget keeps its outer levels and marks the rest", deep_text[-200:])
        await passed_through(client)
        python = await client.call_tool("run_code", {
            "code": "who = await guarded_api.whoami()\nreturn who",
            "language": "python",
        })
        check(not python.is_error and "blue" in python.content[0].text, "from Python too", python.content[0].text)


async def passed_through(client):
    """The remote server's resources, templates and prompts, under its namespace."""
    resources = (await client.list_resources()).resources
    motd = [resource for resource in resources if resource.name == "guarded_api/motd"]
    check(len(motd) == 1 and str(motd[0].uri) == "guarded://motd", "resources are listed as <namespace>/<name>",
          [(r.name, str(r.uri)) for r in resources])
    read = await client.read_resource("guarded://motd")
    check(read.contents[0].text == "all systems nominal", "a listed resource reads from its server", read)
    templates = (await client.list_resource_templates()).resource_templates
    check([(t.name, t.uri_template) for t in templates] == [("guarded_api/user", "guarded://users/{name}")],
          "templates are listed as <namespace>/<name>", templates)
    read = await client.read_resource("guarded://users/ana")
    check(read.contents[0].text == "the profile of ana", "a URI of a template reads from its server", read)
    prompts = (await client.list_prompts()).prompts
    check([prompt.name for prompt in prompts] == ["guarded_api/greet"], "prompts are listed as <namespace>/<name>", prompts)
    prompt = await client.get_prompt("guarded_api/greet", {"name": "ana"})
    check("Say hello to ana" in prompt.messages[0].content.text, "a prompt comes from its server", prompt)
    for attempt, phrase in (
        (client.read_resource("nowhere://x"), 'no resource "nowhere://x"'),
        # flaky lists a URI guarded's template makes: neither answers for the other.
        (client.read_resource("guarded://users/bob"),
         'resource "guarded://users/bob" is claimed by several upstream servers ("flaky", "guarded_api")'),
        (client.get_prompt("nobody/greet", {}), 'no upstream server "nobody" offers prompts'),
        (client.get_prompt("greet", {}), "prompts are <server>/<name>"),
    ):
        try:
            await attempt
            check(False, "an error for " + phrase)
        except Exception as error:  # the SDK raises McpError
            check(phrase in str(error), "a clear error: " + phrase, str(error))


def misuse(config, env, phrase):
    """`code-runtime mcp --config CONFIG` with `env`: exit 2, one line naming `phrase`, and no
    token shown."""
    completed = subprocess.run(
        [BINARY, "mcp", "--config", config],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = completed.stderr.strip().splitlines()
    check(completed.returncode == 2 and len(lines) == 1 and phrase in lines[0] and TOKEN not in completed.stderr
          and "wrong-token" not in completed.stderr,
          "misuse: %s" % phrase, (completed.returncode, completed.stderr))


def certificates(scratch):
    """A certificate authority, and a certificate for 127.0.0.1 it signed: the paths of the
    authority's certificate, the server's certificate, and the server's key."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def certificate(subject, key, issuer, signer, authority, *extensions):
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=authority, path_length=None), True)
        )
        for extension in extensions:
            builder = builder.add_extension(extension, False)
        return builder.sign(signer, hashes.SHA256())

    named = lambda name: x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = certificate(named("code-runtime test authority"), ca_key, named("code-runtime test authority"), ca_key, True)
    server = certificate(named("127.0.0.1"), server_key, ca.subject, ca_key, False,
                         x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]))
    paths = [os.path.join(scratch, name) for name in ("ca.pem", "server.pem", "server-key.pem")]
    for path, data in zip(paths, (
        ca.public_bytes(serialization.Encoding.PEM),
        server.public_bytes(serialization.Encoding.PEM),
        server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()),
    )):
        with open(path, "wb") as file:
            file.write(data)
    return paths


async def over_https(scratch):
    """A remote server over https: reached when its certificate is trusted (`SSL_CERT_FILE`, as
    for the system's roots), refused naming the server when it is not."""
    authority, cert, key = certificates(scratch)
    with guarded_server((cert, key)) as url:
        servers = {"tls": {"type": "http", "url": url, "headers": {"Authorization": "Bearer " + TOKEN},
                           "approval": "none"}}
        config = peers.write_config(scratch, {}, languages=["typescript"], extra={"mcpServers": servers})
        async with peers.session(BINARY, config, "stdio", env={"SSL_CERT_FILE": authority}) as client:
            result = await client.call_tool("run_code", {"code": "return await tls.whoami({})"})
            check(not result.is_error and "authorized" in result.content[0].text,
                  "an https server is reached with the roots the system trusts", result.content[0].text)
        untrusted = subprocess.run([BINARY, "mcp", "--config", config], stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=120,
                                   env={k: v for k, v in os.environ.items() if k != "SSL_CERT_FILE"})
        check(untrusted.returncode == 2 and 'upstream server "tls"' in untrusted.stderr
              and "certificate" in untrusted.stderr.lower(),
              "a certificate nobody trusts is refused, naming the server", untrusted.stderr)


async def main():
    scratch = peers.scratch_dir()
    with guarded_server() as url:
        config = client_config(scratch, url)
        env = {"GUARD_TOKEN": TOKEN, "GATEWAY_SCRATCH": scratch}
        await served(BINARY, config, env)
        check(os.path.exists(os.path.join(scratch, "graph.jsonl")),
              "the command server got its env with ${GATEWAY_SCRATCH} expanded")
        misuse(config, {"GATEWAY_SCRATCH": scratch},
               'mcpServers."guarded-api".headers.Authorization: ${GUARD_TOKEN} is not set')
        # The server is named by its origin: a URL's path and query may carry credentials.
        origin = url.rsplit("/", 1)[0]
        misuse(config, {"GUARD_TOKEN": "wrong-token", "GATEWAY_SCRATCH": scratch},
               'upstream server "guarded_api": cannot connect to %s:' % origin)
    await over_https(scratch)
    print("all gateway checks passed")


anyio.run(main)

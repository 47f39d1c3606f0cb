"""The `code-runtime` command the wheel installs."""

import json
import pathlib
import shutil
import subprocess
import sys

import code_runtime


def command() -> str:
    found = code_runtime.cell_executable()
    assert found, "the wheel installs the code-runtime command"
    # The one on this environment's PATH is the same file.
    scripts = pathlib.Path(sys.executable).parent
    assert (scripts / "code-runtime").exists()
    return found


def test_version_and_help() -> None:
    out = subprocess.run([command(), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("code-runtime ")
    assert subprocess.run([command(), "--help"], capture_output=True, text=True).returncode == 0


def test_run_a_typescript_file_against_bindings(tmp_path: pathlib.Path) -> None:
    program = tmp_path / "p.ts"
    program.write_text("console.log('hi'); return await tools.echo({x: 1});")
    bindings = tmp_path / "b.json"
    bindings.write_text(
        json.dumps({"namespaces": [{"global": "tools", "functions": {"echo": {"echo": True}}}]})
    )
    out = subprocess.run(
        [command(), "run", str(program), "--bindings", str(bindings)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"logs": ["hi"], "value": {"x": 1}}


def test_run_python_from_stdin() -> None:
    out = subprocess.run(
        [command(), "run", "-", "--language", "python"],
        input="return 6 * 7",
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["value"] == 42


def test_misuse_is_exit_code_2_with_one_line() -> None:
    out = subprocess.run([command(), "run", "--no-such-flag"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() and len(out.stderr.strip().splitlines()) >= 1


def test_the_command_is_on_path_of_the_environment() -> None:
    assert shutil.which("code-runtime", path=str(pathlib.Path(sys.executable).parent))


def test_uvx_serves_code_mode_over_mcp_from_the_wheel(tmp_path: pathlib.Path) -> None:
    """`uvx code-runtime mcp`, as an MCP client registers it, offline, from the wheel under test."""
    import asyncio
    import os

    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    wheel = os.environ.get("CODE_RUNTIME_WHEEL")
    assert wheel, "cargo xtask wheel names the wheel under test in CODE_RUNTIME_WHEEL"
    uvx = pathlib.Path(sys.executable).parent / "uvx"
    bindings = tmp_path / "bindings.json"
    bindings.write_text(
        json.dumps({"namespaces": [{"global": "tools", "functions": {"echo": {"echo": True}}}]})
    )
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"servers": {}, "bindings": str(bindings)}))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_TOOL_DIR": str(tmp_path / "uv-tools"),
        "UV_PYTHON": sys.executable,
        "UV_OFFLINE": "1",
        "UV_NO_CONFIG": "1",
    }
    transport = StdioTransport(
        command=str(uvx),
        args=["--from", wheel, "code-runtime", "mcp", "--config", str(config)],
        env=env,
    )

    async def main() -> None:
        async with Client(transport) as client:
            names = {tool.name for tool in await client.list_tools()}
            assert "run_code" in names
            result = await client.call_tool(
                "run_code",
                {"code": "return await tools.echo({n: 6 * 7})", "language": "typescript"},
            )
            assert not result.is_error
            assert json.loads(result.content[0].text) == {"logs": [], "value": {"n": 42}}  # type: ignore[union-attr]

    asyncio.run(main())

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

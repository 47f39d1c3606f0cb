"""`code-runtime mcp` with a virtual environment's packages for Python programs, driven by the
official Python MCP SDK over stdio: `python packages.py BINARY VENV_PYTHON`. The config's
`"python"` names the environment's interpreter and preloads pandas; `run_code`'s description lists
the packages for the model, and a program uses them. Exits non-zero on the first failed check.
Run by code-runtime-cli/tests/it/mcp.rs."""

import json
import sys

import anyio

import peers
from peers import check

BINARY, VENV_PYTHON = sys.argv[1], sys.argv[2]

PROGRAM = """
import sys
preloaded = "pandas" in sys.modules
import pandas as pd
frame = pd.DataFrame({"n": range(1000)})
return {"preloaded": preloaded, "sum": int(frame["n"].sum())}
"""


async def main():
    scratch = peers.scratch_dir()
    python = {"interpreter": VENV_PYTHON, "preload": ["pandas"]}
    config = peers.write_config(scratch, {}, languages=["python"], extra={"python": python})
    async with peers.session(BINARY, config, "stdio") as client:
        tools = await client.list_tools()
        description = next(tool.description for tool in tools.tools if tool.name == "run_code")
        check("pandas 2.3.3" in description and "numpy 2.2.6" in description,
              "run_code's description names the environment's packages", description)
        result = await client.call_tool("run_code", {"code": PROGRAM, "language": "python"})
        check(not result.is_error, "a program imports pandas", result.content[0].text)
        check(json.loads(result.content[0].text)["value"] == {"preloaded": True, "sum": 499500},
              "pandas was preloaded and computes", result.content[0].text)
    print("all package checks passed")


anyio.run(main)

"""``python -m code_runtime.bench [--quick] [--json]``: the package's figures beside the Rust
host's, measured in the same process, on the same provider, turn about.

- ``trivial_run_ms``: ``await rt.run("return 1")`` back to back, p50.
- ``binding_rtt_us``: one program awaiting a Python binding 1 000 times, minus a trivial run,
  per call, p50 over several such runs.

The Rust host's figures are the same programs run on the same provider from Rust (a tokio
``block_on``, as ``code-runtime bench`` polls its runs, and a Rust ``tools.echo``), each run
right after the Python host's: the machine's speed drifts by 2x within minutes, so figures taken
apart compare the moments more than the hosts. The round trip's ratio is the median of each
pair's. The differences are what the Python layer costs: the bars are the trivial run within
1 ms of the Rust host's and the round trip within 2x. pydantic-monty's figures are printed beside
them when it is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from . import Namespace, Runtime

#: (report key, language, isolation): the default configurations, cells made ahead of the runs.
MODES: List[Tuple[str, str, Optional[str]]] = [
    ("python", "python", None),
    ("typescript", "typescript", "process"),
    ("typescript_thread", "typescript", "thread"),
]

TRIVIAL = "return 1"


def _loop_program(language: str) -> str:
    if language == "python":
        return "for i in range(1000):\n    await tools.echo(i)"
    return "for (let i = 0; i < 1000; i++) await tools.echo(i);"


async def _measure(rt: Runtime, samples: int, loops: int) -> Dict[str, Dict[str, float]]:
    rust = rt._native.rust_host_seconds
    for _ in range(3):  # warm up the provider's spares
        await rt.run(TRIVIAL)
        rust(TRIVIAL)
    ours, theirs = [], []
    for _ in range(samples):
        start = time.perf_counter()
        await rt.run(TRIVIAL)
        ours.append(time.perf_counter() - start)
        theirs.append(rust(TRIVIAL))
    trivial, rust_trivial = statistics.median(ours), statistics.median(theirs)
    tools = Namespace("tools")

    @tools.function
    async def echo(value: Any = None) -> Any:
        return value

    program = _loop_program(rt.language)
    per_call, rust_per_call, ratios = [], [], []
    for _ in range(loops):
        start = time.perf_counter()
        result = await rt.run(program, namespaces=[tools])
        assert result.error is None, result.error
        ours_us = max(0.0, time.perf_counter() - start - trivial) * 1e3
        theirs_us = max(0.0, rust(program) - rust_trivial) * 1e3
        per_call.append(ours_us)
        rust_per_call.append(theirs_us)
        if theirs_us > 0:
            ratios.append(ours_us / theirs_us)
    return {
        "python_host": {
            "trivial_run_ms": trivial * 1e3,
            "binding_rtt_us": statistics.median(per_call),
        },
        "rust_host": {
            "trivial_run_ms": rust_trivial * 1e3,
            "binding_rtt_us": statistics.median(rust_per_call),
        },
        "ratios": {
            "trivial_minus_rust_ms": (trivial - rust_trivial) * 1e3,
            "rtt_vs_rust": statistics.median(ratios) if ratios else float("nan"),
        },
    }


def _monty(samples: int) -> Optional[Dict[str, float]]:
    try:
        import pydantic_monty  # type: ignore[import-not-found]
    except ImportError:
        return None
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        pydantic_monty.Monty("1").run()
        times.append(time.perf_counter() - start)
    return {"trivial_run_ms": statistics.median(times) * 1e3}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m code_runtime.bench")
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    samples, loops = (60, 5) if args.quick else (300, 15)
    report: Dict[str, Any] = {"python_host": {}, "rust_host": {}, "ratios": {}}
    for key, language, isolation in MODES:
        with Runtime(language, isolation=isolation) as rt:  # type: ignore[arg-type]
            figures = asyncio.run(_measure(rt, samples, loops))
        report["python_host"][key] = figures["python_host"]
        report["rust_host"][key] = figures["rust_host"]
        for name, value in figures["ratios"].items():
            report["ratios"][f"{key}_{name}"] = value
    monty = _monty(samples)
    if monty is not None:
        report["pydantic_monty"] = monty
    if args.json:
        print(json.dumps(report))
        return 0
    print("code-runtime from Python, beside the Rust host (same process, same provider, turn about)")
    print(f"{'mode':<20}{'trivial p50 ms':>16}{'rust ms':>10}{'rtt p50 us':>12}{'rust us':>10}")
    for key, _, _ in MODES:
        ours, theirs = report["python_host"][key], report["rust_host"][key]
        print(
            f"{key:<20}{ours['trivial_run_ms']:>16.2f}{_num(theirs['trivial_run_ms']):>10}"
            f"{ours['binding_rtt_us']:>12.1f}{_num(theirs['binding_rtt_us']):>10}"
        )
    print("bars: trivial within 1 ms of the Rust host's; round trip within 2x (median of pairs)")
    for name, value in report["ratios"].items():
        print(f"  {name}: {value:.2f}")
    if monty is not None:
        print(f"pydantic-monty trivial run p50: {monty['trivial_run_ms']:.2f} ms")
    return 0


def _num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main())

"""``python -m code_runtime.bench [--quick] [--json]``: the package's figures beside the Rust
host's, measured in the same run by the ``code-runtime bench`` command installed with it.

- ``trivial_run_ms``: ``await rt.run("return 1")`` back to back, p50.
- ``binding_rtt_us``: one program awaiting a Python binding 1 000 times, minus a trivial run,
  per call, p50 over several such runs.

Both are measured as ``code-runtime bench`` measures the Rust host (same programs, same modes,
its figures taken just before and just after ours and averaged, as the machine drifts), so the
differences are what the Python layer costs: the bars are the trivial run within 1 ms of
the Rust host's and the round trip within 2x. pydantic-monty's figures are printed beside them
when it is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import Namespace, Runtime, cell_executable

#: (report key, language, isolation, warm): the modes of ``code-runtime bench``'s figures, as it
#: measures them: the default configurations, cells made ahead of the runs.
MODES: List[Tuple[str, str, Optional[str], bool]] = [
    ("python", "python", None, True),
    ("typescript", "typescript", "process", True),
    ("typescript_thread", "typescript", "thread", True),
]


async def _measure(rt: Runtime, samples: int, loops: int) -> Dict[str, float]:
    for _ in range(3):  # warm up the provider's spares
        await rt.run("return 1")
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        await rt.run("return 1")
        times.append(time.perf_counter() - start)
    trivial = statistics.median(times)
    tools = Namespace("tools")

    @tools.function
    async def echo(value: Any = None) -> Any:
        return value

    program = (
        "for i in range(1000):\n    await tools.echo(i)"
        if rt.language == "python"
        else "for (let i = 0; i < 1000; i++) await tools.echo(i);"
    )
    per_call = []
    for _ in range(loops):
        start = time.perf_counter()
        result = await rt.run(program, namespaces=[tools])
        assert result.error is None, result.error
        per_call.append(max(0.0, time.perf_counter() - start - trivial) / 1000)
    return {
        "trivial_run_ms": trivial * 1e3,
        "binding_rtt_us": statistics.median(per_call) * 1e6,
    }


def _rust_figures(quick: bool, language: str) -> Dict[str, Any]:
    command = cell_executable()
    if command is None:
        return {}
    args = [command, "bench", "--json", "--language", language] + (["--quick"] if quick else [])
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        return {}
    report: Dict[str, Any] = json.loads(out.stdout)
    return report


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
    samples, loops = (60, 3) if args.quick else (300, 10)
    report: Dict[str, Any] = {"python_host": {}, "rust_host": {}, "ratios": {}}
    # The machine's speed drifts over minutes: each language's Rust-host figures are measured
    # just before and just after its Python-host ones, and the two readings averaged.
    readings: Dict[str, List[Dict[str, Any]]] = {}
    for language in ("python", "typescript"):
        before = _rust_figures(args.quick, language)
        for key, mode_language, isolation, warm in MODES:
            if mode_language != language:
                continue
            with Runtime(language, isolation=isolation, warm=warm) as rt:  # type: ignore[arg-type]
                report["python_host"][key] = asyncio.run(_measure(rt, samples, loops))
        after = _rust_figures(args.quick, language)
        for key, mode_language, _, _ in MODES:
            if mode_language == language:
                readings[key] = [rust.get(key) or {} for rust in (before, after)]
    for key, _, _, _ in MODES:
        ours = report["python_host"][key]
        trivial = _mean(reading.get("trivial_run_ms") for reading in readings[key])
        rtt = _mean(reading.get("binding_rtt_us") for reading in readings[key])
        report["rust_host"][key] = {"trivial_run_ms": trivial, "binding_rtt_us": rtt}
        if trivial is not None:
            report["ratios"][f"{key}_trivial_minus_rust_ms"] = ours["trivial_run_ms"] - trivial
        if rtt:
            report["ratios"][f"{key}_rtt_vs_rust"] = ours["binding_rtt_us"] / rtt
    monty = _monty(samples)
    if monty is not None:
        report["pydantic_monty"] = monty
    if args.json:
        print(json.dumps(report))
        return 0
    print("code-runtime from Python, beside the Rust host (same run)")
    print(f"{'mode':<20}{'trivial p50 ms':>16}{'rust ms':>10}{'rtt p50 us':>12}{'rust us':>10}")
    for key, _, _, _ in MODES:
        ours, theirs = report["python_host"][key], report["rust_host"][key]
        print(
            f"{key:<20}{ours['trivial_run_ms']:>16.2f}{_num(theirs['trivial_run_ms']):>10}"
            f"{ours['binding_rtt_us']:>12.1f}{_num(theirs['binding_rtt_us']):>10}"
        )
    print("bars: trivial within 1 ms of the Rust host's; round trip within 2x")
    for name, value in report["ratios"].items():
        print(f"  {name}: {value:.2f}")
    if monty is not None:
        print(f"pydantic-monty trivial run p50: {monty['trivial_run_ms']:.2f} ms")
    return 0


def _mean(figures: Iterable[Optional[Dict[str, Any]]]) -> Optional[float]:
    """The mean of the figures' p50s, or None when no reading has one."""
    values = [figure["p50"] for figure in figures if figure and figure.get("p50") is not None]
    return statistics.mean(values) if values else None


def _num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main())

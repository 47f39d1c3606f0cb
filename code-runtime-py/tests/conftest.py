"""Shared fixtures. The suite runs against the installed wheel (`cargo xtask wheel`), never the
source tree: `code_runtime` must come from site-packages."""

import os
import pathlib
from typing import Iterator

import pytest

import code_runtime


def pytest_configure(config: pytest.Config) -> None:
    location = pathlib.Path(code_runtime.__file__).resolve()
    source = pathlib.Path(__file__).resolve().parent.parent / "python"
    if source in location.parents and not os.environ.get("CODE_RUNTIME_TEST_SOURCE"):
        raise pytest.UsageError(f"code_runtime was imported from the source tree ({location})")


@pytest.fixture(scope="session")
def python_rt() -> Iterator[code_runtime.Runtime]:
    with code_runtime.Runtime("python") as rt:
        yield rt


@pytest.fixture(scope="session")
def ts_rt() -> Iterator[code_runtime.Runtime]:
    with code_runtime.Runtime("typescript") as rt:
        yield rt


@pytest.fixture(scope="session")
def ts_thread_rt() -> Iterator[code_runtime.Runtime]:
    with code_runtime.Runtime("typescript", isolation="thread") as rt:
        yield rt


@pytest.fixture(params=["python", "typescript", "typescript-thread"])
def rt(
    request: pytest.FixtureRequest,
    python_rt: code_runtime.Runtime,
    ts_rt: code_runtime.Runtime,
    ts_thread_rt: code_runtime.Runtime,
) -> code_runtime.Runtime:
    return {"python": python_rt, "typescript": ts_rt, "typescript-thread": ts_thread_rt}[
        request.param
    ]

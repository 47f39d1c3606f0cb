"""Checked with `mypy --strict` against the installed package: what user code looks like."""

import asyncio
from typing import List, Tuple

from code_runtime import (
    ApprovalRequest,
    BindingError,
    ContractError,
    Decision,
    Limits,
    Namespace,
    RunResult,
    Runtime,
    describe,
)

tools = Namespace("tools", error_class="ToolError")


@tools.function
async def search(query: str, limit: int = 10) -> List[str]:
    """Searches."""
    if not query:
        raise BindingError("empty query", {"field": "query"})
    return [query] * limit


@tools.function(approval=True, description="Deletes a thing.")
def delete(name: str) -> bool:
    return True


async def approve(request: ApprovalRequest) -> Decision:
    return Decision.allow() if request.function != "delete" else Decision.deny("no")


async def main() -> None:
    declarations: str = describe([tools], "typescript")
    async with Runtime("typescript", limits=Limits(max_wall_ms=5_000)) as rt:
        result: RunResult = await rt.run(
            "return await tools.search({query: 'x'})",
            namespaces=[tools],
            approver=approve,
            limits={"max_calls": 10},
        )
        if result.error is not None:
            kind: str = result.error.kind
            print(kind, result.error.message)
        values: List[str] = result.value
        packages: List[Tuple[str, str]] = rt.packages
        print(declarations, values, result.logs, result.ok, packages)
    try:
        Runtime("python", limits=Limits(compute_ms=0), preload=["numpy"])
    except ContractError as error:
        print(error)


asyncio.run(main())

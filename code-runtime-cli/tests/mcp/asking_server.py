"""An upstream MCP server that asks its client during calls (built on the official SDK): `ask`
elicits an answer from the user, `summarize` asks the client's model (sampling), `count`
reports progress. `code-runtime mcp` must relay each to the client whose run made the call."""

import anyio
from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent

server = MCPServer("asking")


class Answer(BaseModel):
    answer: str


@server.tool()
async def ask(question: str, ctx: Context) -> str:
    """Asks the user `question`."""
    result = await ctx.elicit(question, schema=Answer)
    return result.data.answer if result.action == "accept" else "the user said " + result.action


@server.tool()
async def ask_later(question: str, seconds: float, ctx: Context) -> str:
    """Waits `seconds`, then asks the user `question`."""
    await anyio.sleep(seconds)
    return await ask(question, ctx)


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model to summarize `text`."""
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=text))],
        max_tokens=50,
    )
    return result.content.text


@server.tool()
async def count(steps: int, ctx: Context) -> int:
    """Counts to `steps`, reporting progress at each."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, "step %d" % (step + 1))
    return steps


if __name__ == "__main__":
    server.run()

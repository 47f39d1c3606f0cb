# At most two calls in flight (maxPendingCalls 2): a third started before any settles waits its
# turn and runs once one settles; none is refused.
import asyncio

first = await asyncio.gather(tools.slow(1), tools.slow(2), tools.slow(3), return_exceptions=True)
seen = [[o.toolName, str(o)] if isinstance(o, ToolCallError) else o for o in first]
seen.append(await tools.slow(4))
return seen

# asyncio.gather over four times the calls the host runs at once (maxPendingCalls 3): the calls
# past it wait their turn; none is refused.
import asyncio

all = await asyncio.gather(*(tools.echo(i) for i in range(12)))
return {"count": len(all), "sum": sum(all), "last": all[11]}

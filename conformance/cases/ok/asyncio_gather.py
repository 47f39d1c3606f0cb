import asyncio
results = await asyncio.gather(*[tools.echo(i) for i in range(10)])
return sum(results)

# A program that returns a function it never called fails clearly instead of giving nothing.
async def summarize():
    return len(await tools.list_orders({}))
return summarize

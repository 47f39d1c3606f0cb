# Over the run's budget of calls (maxCalls 3), a call rejects with the namespace's error class,
# a catalogued message and data naming the budget; the run goes on.
seen = []
for i in range(5):
    try:
        seen.append(await tools.echo({"i": i}))
    except ToolCallError as e:
        seen.append([type(e).__name__, e.toolName, str(e), e.data])
return seen

# A namespace that validates its arguments: a call whose argument does not match the function's
# input schema rejects with the namespace's error class, a message naming the first failing path,
# and data the program can branch on; the host never sees it. Functions without a schema are not
# checked. A bare string takes the schema's first property (positional arguments).
seen = [await tools.search(q="rust", limit=5, sort="date")]
for args in [{"q": "rust", "limit": 500}, {"q": ""}, {"q": "rust", "sort": "stars"}, {"limit": 5}, "rust", None]:
    try:
        seen.append(await tools.search(args))
    except ToolCallError as e:
        seen.append([type(e).__name__, e.toolName, str(e), e.data])
seen.append(await tools.ping({"anything": [1, 2, 3]}))
return seen

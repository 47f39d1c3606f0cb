# Each function has its own budget (maxCallsPerFunction 2): each runs out on its own third call.
seen = []
for i in range(3):
    for name in ("lookup", "echo"):
        try:
            seen.append(await getattr(tools, name)({"i": i}))
        except ToolCallError as e:
            seen.append([e.toolName, str(e), e.data["budget"], e.data["limit"]])
return seen

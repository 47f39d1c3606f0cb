# A rejection carries the host's structured data as `e.data` (None when there is none).
seen = []
for call in (lambda: tools.fetch({"url": "/a"}), lambda: tools.plain({})):
    try:
        await call()
    except ToolCallError as e:
        seen.append([e.toolName, str(e), None if e.data is None else e.data["status"]])
return seen

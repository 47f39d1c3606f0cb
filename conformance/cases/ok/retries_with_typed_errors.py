attempts = 0
last = ""
while attempts < 3:
    attempts += 1
    try:
        await tools.flaky({"attempt": attempts})
    except ToolCallError as error:
        last = f"{error.toolName}: {error}"
        print("retry", attempts)
fallback = await tools.search({"q": "cached"})
return {"attempts": attempts, "last": last, "fallback": len(fallback["hits"])}

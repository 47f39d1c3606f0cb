collected = []
pages = 0
while pages < 5:
    collected.extend((await tools.page({"page": pages}))["items"])
    pages += 1
return {"pages": pages, "count": len(collected), "sum": sum(collected)}

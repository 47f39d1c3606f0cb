regions = ["north", "south", "east"]
calls = [tools.orders({"region": region}) for region in regions]
totals = {}
tags = {}
for region, call in zip(regions, calls):
    page = await call
    totals[region] = sum(order["amount"] for order in page["orders"])
    for order in page["orders"]:
        for tag in order["tags"]:
            tags[tag] = tags.get(tag, 0) + 1
return {"totals": totals, "tags": tags}

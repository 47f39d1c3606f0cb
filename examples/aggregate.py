# A data task: pull orders from several calls, aggregate them, print a summary, return the totals.
regions = ["north", "south", "east"]
pending = [tools.orders({"region": region}) for region in regions]
totals = {}
for region, call in zip(regions, pending):
    orders = await call
    totals[region] = sum(order["amount"] for order in orders["orders"])
    print(f"{region}: {len(orders['orders'])} orders")
try:
    await tools.refund({"order": 7})
except ToolCallError as error:
    print("refund refused:", error.toolName, str(error))
return {"totals": totals, "grand_total": sum(totals.values())}

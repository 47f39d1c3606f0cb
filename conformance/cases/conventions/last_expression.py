# A program that ends with an expression, as notebook-style code-mode prompts ask: its value is
# the result.
orders = await tools.list_orders({})
total = sum(order["total"] for order in orders)
{"count": len(orders), "total": total}

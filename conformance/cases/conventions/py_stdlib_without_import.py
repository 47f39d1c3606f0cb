# `json` and `asyncio` are there without an import, as many code-mode prompts present them.
orders, weather = await asyncio.gather(tools.list_orders({}), tools.get_weather({"city": "Lisbon"}))
json.dumps({"orders": len(orders), "celsius": weather["celsius"]}, sort_keys=True)

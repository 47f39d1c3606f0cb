# FastMCP's code mode: one untyped `call_tool(name, params)`, by bare name when it is unique,
# else by "namespace.function"; an unknown or ambiguous name is a TypeError listing the names.
place = await call_tool("lookup", {"query": "Porto"})
forecast = await call_tool("weather.get_forecast", {"lat": place["lat"], "days": 2})
try:
    await call_tool("get_forecast", {})
    ambiguous = None
except TypeError as error:
    ambiguous = str(error)
return {"city": place["city"], "forecast": forecast, "ambiguous": ambiguous}

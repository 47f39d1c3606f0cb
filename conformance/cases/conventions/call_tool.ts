// FastMCP's code mode: one untyped `call_tool(name, params)`, by bare name when it is unique,
// else by "namespace.function"; an unknown or ambiguous name is a TypeError listing the names.
const place = await call_tool("lookup", { query: "Porto" });
const forecast = await call_tool("weather.get_forecast", { lat: place.lat, days: 2 });
let ambiguous = null;
try {
  await call_tool("get_forecast", {});
} catch (error) {
  if (error instanceof TypeError) ambiguous = error.message;
}
return { city: place.city, forecast, ambiguous };

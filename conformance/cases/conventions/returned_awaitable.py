# A program that returns a coroutine without awaiting it: the coroutine is awaited, as a returned
# promise is in TypeScript.
async def weather():
    return (await tools.get_weather({"city": "Lisbon"}))["celsius"]
return weather()

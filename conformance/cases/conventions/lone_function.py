# A program that is one function definition and nothing else: the function is called, and what
# it returns is the value.
async def main():
    weather = await tools.get_weather({"city": "Lisbon"})
    return weather["celsius"]

# A whole script, as models write one: an `async def main()` run by `asyncio.run` under the
# `__main__` guard. Its result is the program's value.
import asyncio


async def main():
    cities = ["Lisbon", "Porto"]
    forecasts = await asyncio.gather(*(tools.get_weather({"city": c}) for c in cities))
    return [f["city"] for f in forecasts]


if __name__ == "__main__":
    asyncio.run(main())

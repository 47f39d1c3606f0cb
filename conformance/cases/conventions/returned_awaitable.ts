// A program that returns a call's promise without awaiting it: the promise is awaited.
async function weather() {
  return (await tools.get_weather({ city: "Lisbon" })).celsius;
}
return weather();

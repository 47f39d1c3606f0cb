// A program that is one function declaration and nothing else: the function is called, and what
// it returns is the value.
async function main() {
  const weather = await tools.get_weather({ city: "Lisbon" });
  return weather.celsius;
}

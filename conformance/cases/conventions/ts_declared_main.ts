// A program that declares `main` and calls it without `await` as its last statement: the call's
// promise is the program's value, so the run waits for it.
async function main() {
  const weather = await tools.get_weather({ city: "Lisbon" });
  return `${weather.city}: ${weather.celsius} C`;
}
main();

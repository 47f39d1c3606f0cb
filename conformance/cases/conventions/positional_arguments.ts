// Tools called with positional arguments, as programs written for bare-function conventions do:
// with an input schema that describes an object, they take its properties in declared order;
// one object is still the whole argument; too many arguments are a TypeError naming the binding,
// never dropped.
const seen = [
  await tools.query_database("SELECT name FROM teams"),
  await tools.query_database("SELECT 1", 10),
  await tools.query_database({ sql: "SELECT 2" }),
  await tools.write_file("/notes/today.md", "# Today"),
  await tools.echo("no schema: the one argument as it is"),
];
for (const call of [() => tools.write_file("a", "b", "c"), () => tools.echo(1, 2)]) {
  try {
    await call();
  } catch (e) {
    seen.push([e.name, e.message]);
  }
}
return seen;

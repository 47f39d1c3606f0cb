# Tools called with positional arguments, as programs written for bare-function conventions do:
# with an input schema that describes an object, they take its properties in declared order;
# one object is still the whole argument; too many arguments are a TypeError naming the binding,
# never dropped.
seen = [
    await tools.query_database("SELECT name FROM teams"),
    await tools.query_database("SELECT 1", 10),
    await tools.query_database({"sql": "SELECT 2"}),
    await tools.write_file("/notes/today.md", "# Today"),
    await tools.echo("no schema: the one argument as it is"),
]
for call in [lambda: tools.write_file("a", "b", "c"), lambda: tools.echo(1, 2)]:
    try:
        await call()
    except TypeError as e:
        seen.append([type(e).__name__, str(e)])
return seen

# Python may mix positional and keyword arguments when the input schema names the parameters;
# one given both ways is a TypeError.
seen = [await tools.query_database("SELECT 1", limit=5), await tools.write_file("/a.md", content="x")]
try:
    await tools.query_database("SELECT 1", sql="SELECT 2")
except TypeError as e:
    seen.append(str(e))
return seen

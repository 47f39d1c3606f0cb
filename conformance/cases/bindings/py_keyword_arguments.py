# Keyword arguments are one JSON object (docs/design.md §9 item 8); mixing them with a positional
# argument is a TypeError.
found = await tools.echo(q="rust", limit=2)
try:
    await tools.echo({"q": "rust"}, limit=2)
    mixed = "called"
except TypeError as error:
    mixed = str(error)
return [found, mixed]

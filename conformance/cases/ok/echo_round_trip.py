return await tools.echo({"n": 1, "list": [True, None, "x", 1.5]})

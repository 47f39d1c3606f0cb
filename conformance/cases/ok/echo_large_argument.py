big = [{"i": i, "s": "x" * 10} for i in range(10000)]
back = await tools.echo(big)
return len(back)

return await tools.echo(1, 2, 3)

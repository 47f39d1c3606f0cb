await tools.echo(1)
await tools.echo(2)
raise ValueError("late failure")

await tools.echo(1);
await tools.echo(2);
throw new Error("late failure");

return await print.echo(1);

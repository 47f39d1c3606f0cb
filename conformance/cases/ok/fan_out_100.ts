const values = await Promise.all(Array.from({ length: 100 }, (_, i) => tools.echo(i)));
return values.reduce((a: number, b: number) => a + b, 0);

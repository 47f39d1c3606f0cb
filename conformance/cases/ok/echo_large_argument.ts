const big = Array.from({ length: 10_000 }, (_, i) => ({ i, s: "x".repeat(10) }));
const back = await tools.echo(big);
return back.length;

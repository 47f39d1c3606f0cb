let reads = 0;
const o = { get v() { reads++; return 1 } };
const echoed = await tools.echo(o);
return [echoed, reads]

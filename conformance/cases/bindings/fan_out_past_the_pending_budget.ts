// Promise.all over four times the calls the host runs at once (maxPendingCalls 3): the calls past
// it wait their turn, as in any JavaScript engine; none is refused.
const all = await Promise.all(Array.from({ length: 12 }, (_, i) => tools.echo(i)));
return { count: all.length, sum: all.reduce((a, b) => a + b, 0), last: all[11] };

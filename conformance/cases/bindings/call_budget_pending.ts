// At most two calls in flight (maxPendingCalls 2): a third started before any settles waits its
// turn and runs once one settles; none is refused.
const first = await Promise.allSettled([tools.slow(1), tools.slow(2), tools.slow(3)]);
const seen = first.map((o) => (o.status === "fulfilled" ? o.value : [o.reason.toolName, o.reason.message]));
seen.push(await tools.slow(4));
return seen;

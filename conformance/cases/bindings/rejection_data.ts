// A rejection carries the host's structured data as `e.data` (null when there is none).
const seen = [];
for (const call of [() => tools.fetch({ url: "/a" }), () => tools.plain({})]) {
  try {
    await call();
  } catch (e) {
    seen.push([e.toolName, e.message, e.data === null ? null : e.data.status]);
  }
}
return seen;

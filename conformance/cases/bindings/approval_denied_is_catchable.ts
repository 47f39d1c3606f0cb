// A call that needs approval, with no approver, is denied: the namespace's error class, catchable
// (docs/design.md §13). A call whose argument does not match the approval schema is not asked about.
const out = [];
try {
  await tools.delete({ name: "infra" });
} catch (e) {
  out.push([e instanceof ToolCallError, e.toolName, e.message]);
}
out.push(await tools.write({ force: false }));
try {
  await tools.write({ force: true });
} catch (e) {
  out.push([e instanceof ToolCallError, e.toolName, e.message]);
}
return out;

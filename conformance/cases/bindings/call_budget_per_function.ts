// Each function has its own budget (maxCallsPerFunction 2): each runs out on its own third call.
const seen = [];
for (let i = 0; i < 3; i++) {
  for (const name of ["lookup", "echo"]) {
    try {
      seen.push(await tools[name]({ i }));
    } catch (e) {
      seen.push([e.toolName, e.message, e.data.budget, e.data.limit]);
    }
  }
}
return seen;

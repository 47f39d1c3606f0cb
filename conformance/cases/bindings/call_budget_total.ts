// Over the run's budget of calls (maxCalls 3), a call rejects with the namespace's error class,
// a catalogued message and data naming the budget; the run goes on.
const seen = [];
for (let i = 0; i < 5; i++) {
  try {
    seen.push(await tools.echo({ i }));
  } catch (e) {
    seen.push([e.name, e.toolName, e.message, e.data]);
  }
}
return seen;

// A namespace that validates its arguments: a call whose argument does not match the function's
// input schema rejects with the namespace's error class, a message naming the first failing path,
// and data the program can branch on; the host never sees it. Functions without a schema are not
// checked. A bare string takes the schema's first property (positional arguments).
const seen = [await tools.search({ q: "rust", limit: 5, sort: "date" })];
for (const args of [{ q: "rust", limit: 500 }, { q: "" }, { q: "rust", sort: "stars" }, { limit: 5 }, "rust", null]) {
  try {
    seen.push(await tools.search(args));
  } catch (e) {
    seen.push([e.name, e.toolName, e.message, e.data]);
  }
}
seen.push(await tools.ping({ anything: [1, 2, 3] }));
return seen;

let attempts = 0;
let last = "";
while (attempts < 3) {
  attempts++;
  try {
    await tools.flaky({ attempt: attempts });
  } catch (error) {
    if (!(error instanceof ToolCallError)) throw error;
    last = `${error.toolName}: ${error.message}`;
    console.log("retry", attempts);
  }
}
const fallback = await tools.search({ q: "cached" });
return { attempts, last, fallback: fallback.hits.length };

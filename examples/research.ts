// A research task: fan out over a search binding, keep the best hit per topic, report progress.
type Hit = { title: string; score: number };

const topics = ["rust async runtimes", "v8 isolates", "python subinterpreters"];
const results = await Promise.all(topics.map((q) => tools.search({ q, limit: 3 })));
const best = results.map((result: { hits: Hit[] }, i: number) => {
  const top = result.hits.reduce((a, b) => (b.score > a.score ? b : a));
  console.log(`${topics[i]}: ${result.hits.length} hits, best "${top.title}"`);
  return { topic: topics[i], best: top.title };
});
let missing = "";
try {
  await tools.fetch_page({ url: "https://example.invalid/missing" });
} catch (error) {
  if (error instanceof ToolCallError) missing = `${error.toolName}: ${error.message}`;
}
return { best, missing };

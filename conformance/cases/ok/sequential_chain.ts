const { hits } = await tools.search({ q: "rust" });
const best = hits.reduce((a: any, b: any) => (b.score > a.score ? b : a));
const page = await tools.fetch({ url: best.url });
const sentences = page.text.split(". ").length;
console.log("best", best.url, "sentences", sentences);
return { url: best.url, sentences };

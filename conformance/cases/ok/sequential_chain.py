hits = (await tools.search({"q": "rust"}))["hits"]
best = max(hits, key=lambda hit: hit["score"])
page = await tools.fetch({"url": best["url"]})
sentences = len(page["text"].split(". "))
print("best", best["url"], "sentences", sentences)
return {"url": best["url"], "sentences": sentences}

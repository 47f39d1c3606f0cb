text = "The quick brown fox jumps over the lazy dog"
words = text.lower().split(" ")
longest = words[0]
for word in words:
    if len(word) > len(longest):
        longest = word
return {"words": len(words), "longest": longest, "joined": "-".join(words[:3])}

const text = "The quick brown fox jumps over the lazy dog";
const words = text.toLowerCase().split(" ");
return { words: words.length, longest: words.reduce((a, b) => (b.length > a.length ? b : a)), joined: words.slice(0, 3).join("-") };

// A URL taken apart and a query built, as Python's urllib.parse does it.
const url = new URL("https://user:pw@api.example.com:8443/v1/items/../search?q=a+b&tag=x&tag=y#top");
const params = new URLSearchParams({ q: "café & co", page: "2" });
params.append("tag", "a/b");
return {
  scheme: url.protocol.slice(0, -1),
  host: url.hostname,
  port: Number(url.port),
  path: url.pathname,
  query: [...url.searchParams],
  fragment: url.hash.slice(1),
  user: url.username,
  joined: new URL("../other?x=1", "https://example.com/a/b/c").href,
  encoded: params.toString(),
};

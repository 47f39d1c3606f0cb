# A URL taken apart and a query built, as TypeScript's URL and URLSearchParams do it.
import posixpath
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

url = urlsplit("https://user:pw@api.example.com:8443/v1/items/../search?q=a+b&tag=x&tag=y#top")
return {
    "scheme": url.scheme,
    "host": url.hostname,
    "port": url.port,
    "path": posixpath.normpath(url.path),
    "query": [list(pair) for pair in parse_qsl(url.query)],
    "fragment": url.fragment,
    "user": url.username,
    "joined": urljoin("https://example.com/a/b/c", "../other?x=1"),
    "encoded": urlencode([("q", "café & co"), ("page", "2"), ("tag", "a/b")]),
}

"""A browser for tests of the authorization code grant: `python browser.py URL` opens the
authorization URL as a user's browser would, and follows its redirects, the last of which takes
the code to `code-runtime mcp`'s loopback listener. `code-runtime mcp` starts it as `$BROWSER`.
Authorization servers of tests grant at once (the conformance suite's redirects with a code);
with `BROWSER_REFUSE=1` it answers the redirect URI with `error=access_denied` instead, as a user
who refuses would. `BROWSER_LOG=FILE` appends each URL it opens to FILE; `BROWSER_FORGE=1`
first sends the loopback listener two forged answers (another path, a wrong state), as a hostile
process on the machine could."""

import os
import sys
import urllib.error
import urllib.parse
import urllib.request


class Refuse(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        query = urllib.parse.urlsplit(newurl).query
        params = dict(urllib.parse.parse_qsl(query))
        if "code" in params:
            target = urllib.parse.urlsplit(newurl)
            refused = urllib.parse.urlencode({"error": "access_denied",
                                              "error_description": "the user said no",
                                              "state": params.get("state", "")})
            newurl = urllib.parse.urlunsplit(target._replace(query=refused))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


url = sys.argv[1]
if os.environ.get("BROWSER_LOG"):
    with open(os.environ["BROWSER_LOG"], "a") as log:
        log.write(url + "\n")
if os.environ.get("BROWSER_FORGE") == "1":
    redirect = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))["redirect_uri"]
    origin = urllib.parse.urlsplit(redirect)._replace(path="", query="").geturl()
    for forged in (redirect + "?code=forged&state=wrong", origin + "/elsewhere?code=forged"):
        try:
            urllib.request.urlopen(forged, timeout=10).read()
            sys.exit("a forged answer was taken: " + forged)
        except urllib.error.HTTPError as refused:
            assert refused.code == 404, refused.code
handlers = [Refuse()] if os.environ.get("BROWSER_REFUSE") == "1" else []
with urllib.request.build_opener(*handlers).open(url, timeout=30) as page:
    page.read()

#!/usr/bin/env python3
"""A member's browser for the interop suite: opens an authorization URL a
client built, signs in with Hearth's real sign-in form, presses Authorize on
the real consent form (after the sign-in form the page shows itself for
force_login), and prints the result: the authorization code shown
on the page (out-of-band clients such as toot) or the redirect to the
client's callback.

    member_browser.py AUTHORIZE_URL      (HEARTH_USER, HEARTH_PASSWORD set)

It is the member's side only: the clients under test build the URL and use
the result themselves. Standard library only. Exits 1 with a message on any
surprise.
"""
import html.parser
import http.cookiejar
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Forms(html.parser.HTMLParser):
    """The POST forms of a page: action, hidden fields, buttons."""

    def __init__(self):
        super().__init__()
        self.forms = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("method", "get").lower() == "post":
            self.forms.append({"action": a.get("action", ""), "hidden": [], "buttons": []})
        elif self.forms and tag == "input" and a.get("type") == "hidden":
            self.forms[-1]["hidden"].append((a.get("name", ""), a.get("value") or ""))
        elif self.forms and tag == "button" and a.get("name"):
            self.forms[-1]["buttons"].append((a["name"], a.get("value", "")))


def die(msg):
    print("member_browser: " + msg, file=sys.stderr)
    sys.exit(1)


class Browser:
    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)

    def request(self, url, data=None, origin=None):
        req = urllib.request.Request(url, data=data)
        req.add_header("User-Agent", "hearth-interop-member-browser")
        if data is not None:
            req.add_header("Content-Type", "application/x-www-form-urlencoded")
            req.add_header("Origin", origin)
            req.add_header("Sec-Fetch-Site", "same-origin")
        else:
            req.add_header("Sec-Fetch-Site", "none")
        try:
            resp = self.opener.open(req, timeout=30)
        except urllib.error.HTTPError as e:
            resp = e
        body = resp.read().decode("utf-8", "replace")
        return resp.status, resp.headers, body

    def submit(self, page_url, body, action, fields):
        p = Forms()
        p.feed(body)
        form = next((f for f in p.forms if f["action"] == action), None)
        if form is None:
            die(f"no form to {action} on {page_url}:\n{body[:2000]}")
        values = list(form["hidden"]) + list(fields)
        u = urllib.parse.urlsplit(page_url)
        origin = f"{u.scheme}://{u.netloc}"
        return self.request(urllib.parse.urljoin(page_url, action), urllib.parse.urlencode(values).encode(), origin)


def main():
    if len(sys.argv) != 2:
        die("usage: member_browser.py AUTHORIZE_URL")
    user, password = os.environ.get("HEARTH_USER"), os.environ.get("HEARTH_PASSWORD")
    if not user or not password:
        die("HEARTH_USER and HEARTH_PASSWORD must be set")
    url = sys.argv[1]
    b = Browser()
    status, headers, body = b.request(url)
    sign_in = None
    if status == 303:
        # Not signed in: the authorization page sends us to sign in.
        sign_in = urllib.parse.urljoin(url, headers["Location"])
        status, headers, body = b.request(sign_in)
        if status != 200:
            die(f"sign-in page: HTTP {status}")
    elif status == 200 and 'action="/auth/sign_in"' in body:
        # force_login: the authorization page itself shows the sign-in form.
        sign_in = url
    if sign_in is not None:
        status, headers, body = b.submit(sign_in, body, "/auth/sign_in", [("username", user), ("password", password)])
        if status != 303:
            die(f"sign-in failed: HTTP {status}:\n{body[:2000]}")
        url = urllib.parse.urljoin(sign_in, headers["Location"])
        status, headers, body = b.request(url)
    if status != 200 or "Authorize" not in body:
        die(f"consent page {url}: HTTP {status}:\n{body[:2000]}")
    status, headers, body = b.submit(url, body, "/oauth/authorize", [("decision", "approve")])
    if status == 302:
        print("redirect " + headers["Location"])
        return
    m = re.search(r'<output id="authorization-code"><code>([^<]+)</code></output>', body)
    if status != 200 or not m:
        die(f"approval: HTTP {status}:\n{body[:2000]}")
    print("code " + m.group(1))


if __name__ == "__main__":
    main()

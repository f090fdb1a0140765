#!/usr/bin/env python3
"""Mastodon.py (Debian python3-mastodon, 1.8) against Hearth, unmodified:
create_app, auth_request_url, the member approves in a browser (out-of-band
code), log_in with the code, account_verify_credentials, its version
detection (retrieve_mastodon_version reads /api/v1/instance/ with a
trailing slash), instance(), revoke_access_token (which sends the token as
Authorization: Bearer too), and the revoked token refused.

    mastodonpy_client.py BASE_URL   (HEARTH_USER/PASSWORD set)
"""
import os
import subprocess
import sys

import requests
from mastodon import Mastodon, MastodonUnauthorizedError

HERE = os.path.dirname(os.path.abspath(__file__))
OOB = "urn:ietf:wg:oauth:2.0:oob"
SCOPES = ["read", "write"]


def fail(msg):
    print("Mastodon.py: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    base = sys.argv[1]
    user = os.environ["HEARTH_USER"]
    client_id, client_secret = Mastodon.create_app("hearth-interop Mastodon.py", scopes=SCOPES,
                                                   redirect_uris=OOB, api_base_url=base)
    m = Mastodon(client_id=client_id, client_secret=client_secret, api_base_url=base)
    # Version detection ran in the constructor (version_check_mode "created").
    if not m.version_check_worked or (m.mastodon_major, m.mastodon_minor) != (4, 4):
        fail(f"version detection: worked={m.version_check_worked} {m.mastodon_major}.{m.mastodon_minor}.{m.mastodon_patch}")
    print(f"Mastodon.py: version detection ok ({m.retrieve_mastodon_version()})")
    url = m.auth_request_url(redirect_uris=OOB, scopes=SCOPES, state="mpy-state")
    b = subprocess.run([sys.executable, os.path.join(HERE, "member_browser.py"), url], capture_output=True, text=True, timeout=60)
    if b.returncode != 0 or not b.stdout.startswith("code "):
        fail("approving in the browser:\n" + b.stdout + b.stderr)
    token = m.log_in(code=b.stdout.split(" ", 1)[1].strip(), redirect_uri=OOB, scopes=SCOPES)
    print("Mastodon.py: authorization code exchanged ok")
    me = m.account_verify_credentials()
    if me["username"] != user:
        fail(f"verify_credentials: {me}")
    print("Mastodon.py: verify_credentials ok")
    inst = m.instance()
    if not str(inst["version"]).startswith("4.4.0") or not m.verify_minimum_version("4.0.0", cached=True):
        fail(f"instance: {inst}")
    print("Mastodon.py: instance ok")
    # force_login=True (auth_request_url, mastodon/authentication.py in
    # Debian's python3-mastodon 1.8: "always log in even when already
    # logged in"): the authorization page shows the sign-in form, then the
    # consent page; the code it gives works.
    url = m.auth_request_url(redirect_uris=OOB, scopes=SCOPES, force_login=True)
    if "force_login=True" not in url:
        fail(f"auth_request_url(force_login=True) built {url}")
    b = subprocess.run([sys.executable, os.path.join(HERE, "member_browser.py"), url], capture_output=True, text=True, timeout=60)
    if b.returncode != 0 or not b.stdout.startswith("code "):
        fail("approving with force_login in the browser:\n" + b.stdout + b.stderr)
    again = Mastodon(client_id=client_id, client_secret=client_secret, api_base_url=base)
    again.log_in(code=b.stdout.split(" ", 1)[1].strip(), redirect_uri=OOB, scopes=SCOPES)
    if again.account_verify_credentials()["username"] != user:
        fail("the token after force_login is not the member's")
    again.revoke_access_token()
    print("Mastodon.py: force_login ok")
    m.revoke_access_token()
    print("Mastodon.py: revoke_access_token ok")
    old = Mastodon(client_id=client_id, client_secret=client_secret, access_token=token, api_base_url=base)
    try:
        old.account_verify_credentials()
        fail("the revoked token still works")
    except MastodonUnauthorizedError:
        print("Mastodon.py: revoked token refused ok")

    # Rate limits: on a site with token_limit 2 2s, revocations beyond the
    # limit are answered 429; Mastodon.py (ratelimit_method "wait",
    # internals.py __api_request) sleeps until X-RateLimit-Reset and retries
    # (and raises if Reset has passed and it is refused). Every call must
    # succeed, the session's response hook must have seen 429s, and no
    # retry at Reset may be refused again.
    limited = os.environ.get("HEARTH_INTEROP_LIMITED_URL")
    if limited:
        seen = []
        session = requests.Session()
        session.hooks["response"].append(lambda r, *a, **k: seen.append(r.status_code))
        rl = Mastodon(client_id=client_id, client_secret=client_secret, api_base_url=limited,
                      ratelimit_method="wait", session=session)
        for _ in range(6):
            rl.access_token = token  # revoke_access_token clears it; revoking again answers 200 {}
            rl.revoke_access_token()
        if 429 not in seen:
            fail(f"no 429 seen on the limited site: {seen}")
        # Refused again after waiting until Reset: Reset was too early.
        if any(a == 429 and b == 429 for a, b in zip(seen, seen[1:])):
            fail(f"a retry at X-RateLimit-Reset was refused again: {seen}")
        print(f"Mastodon.py: waited out {seen.count(429)} 429s and retried ok")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""toot (Debian package, 0.34) against Hearth, run unmodified as a user
runs it: `toot login` (the out-of-band code flow: toot prints the
authorization URL, the member approves in a browser, the code shown there is
typed back), `toot whoami` (verify_credentials), `toot instance` (toot's
instance detection and version), and, since toot has no command that
revokes, the member's client revoking toot's token with toot's own saved
client credentials at POST /oauth/revoke; `toot whoami` must then fail.

    toot_client.py BASE_HOST   (e.g. 127.0.0.1:18080; HEARTH_USER/PASSWORD set)
"""
import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print("toot: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_until(proc, marker):
    out = b""
    while not out.endswith(marker):
        c = proc.stdout.read(1)
        if not c:
            fail(f"toot exited before printing {marker!r}; output:\n{out.decode(errors='replace')}")
        out += c
    return out.decode(errors="replace")


def toot(env, *args, check=True):
    p = subprocess.run(["toot", *args], env=env, capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        fail(f"toot {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def main():
    host = sys.argv[1]
    base = "http://" + host
    home = tempfile.mkdtemp(prefix="hearth-toot-")
    env = dict(os.environ, XDG_CONFIG_HOME=home, PYTHONUNBUFFERED="1", BROWSER="false", NO_COLOR="1")
    proc = subprocess.Popen(["toot", "login", "--disable-https", "--instance", host],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = read_until(proc, b"[Y/n]")
    url = next((line.strip() for line in out.splitlines() if "/oauth/authorize/?" in line), None)
    if not url:
        fail("no authorization URL in toot's output:\n" + out)
    proc.stdin.write(b"n\n")
    proc.stdin.flush()
    read_until(proc, b"Authorization code: ")
    b = subprocess.run([sys.executable, os.path.join(HERE, "member_browser.py"), url], capture_output=True, text=True, timeout=60)
    if b.returncode != 0 or not b.stdout.startswith("code "):
        fail("approving toot in the browser:\n" + b.stdout + b.stderr)
    proc.stdin.write(b.stdout.split(" ", 1)[1].strip().encode() + b"\n")
    proc.stdin.flush()
    rest = proc.stdout.read().decode(errors="replace")
    if proc.wait(60) != 0 or "Successfully logged in" not in rest:
        fail(f"toot login exited {proc.returncode}:\n{out}{rest}")
    print("toot: login (out-of-band code) ok")

    who = toot(env, "whoami")
    if "@" + os.environ["HEARTH_USER"] not in who.stdout:
        fail("toot whoami:\n" + who.stdout)
    print("toot: whoami ok")

    inst = toot(env, "instance", "--disable-https", host)
    if "4.4.0" not in inst.stdout:
        fail("toot instance shows no Mastodon version:\n" + inst.stdout)
    print("toot: instance ok")

    with open(os.path.join(home, "toot", "config.json")) as f:
        cfg = json.load(f)
    app = cfg["apps"][host]
    user = next(iter(cfg["users"].values()))
    form = urllib.parse.urlencode({"client_id": app["client_id"], "client_secret": app["client_secret"], "token": user["access_token"]})
    with urllib.request.urlopen(base + "/oauth/revoke", form.encode(), timeout=30) as r:
        if r.status != 200:
            fail(f"revoke: HTTP {r.status}")
    who = toot(env, "whoami", check=False)
    if who.returncode == 0:
        fail("toot whoami still works after the token was revoked:\n" + who.stdout)
    print("toot: revoked token refused ok")


if __name__ == "__main__":
    main()

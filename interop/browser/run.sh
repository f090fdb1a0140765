#!/usr/bin/env bash
# The browser suite: Debian's Chromium driven from Go through
# chromedp, axe-core and Lighthouse from this folder's package-lock.json, against a Caddy
# started from a Caddyfile in the test (site 127.0.0.1:18280, admin
# localhost:12219). Screenshots land in build/screenshots/ at the top of
# the tree. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ ! -f "$here/node_modules/axe-core/axe.min.js" ] || [ ! -f "$here/node_modules/lighthouse/cli/index.js" ]; then
	(cd "$here" && npm ci --no-audit --no-fund)
fi
cd "$root"
tags=nobadger,nomysql,nopgx,browser
# The suite's file builds only with the browser tag: vet it here.
go vet -tags "$tags" ./interop/browser/
# The oauth2-proxy walk has its own stage (it builds oauth2-proxy first).
go test -tags "$tags" -count=1 -skip TestOAuth2ProxyInChromium "$@" ./interop/browser/

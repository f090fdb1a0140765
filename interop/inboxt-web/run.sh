#!/usr/bin/env bash
# Inboxt's own web app on Hearth in Debian's Chromium (chromedp), configured
# as docs/inboxt-web.md's recipe: the app on http://localhost:18480, Hearth's
# own host http://127.0.0.1:18480, admin localhost:12419. The app's build
# comes from $HEARTH_INBOXT_WEB (default: ../shared/inboxt/web beside the
# tree), never from the module. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
tags=nobadger,nomysql,nopgx,browser
go vet -tags "$tags" ./interop/inboxt-web/
go test -tags "$tags" -count=1 "$@" ./interop/inboxt-web/

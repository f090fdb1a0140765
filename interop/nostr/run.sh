#!/usr/bin/env bash
# The directory's example events (docs/directory.md) signed with nostr-tools
# from this folder's package-lock.json and sent with curl, as the docs say,
# to a directory on loopback. See README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ ! -f "$here/node_modules/nostr-tools/package.json" ]; then
	(cd "$here" && npm ci --no-audit --no-fund)
fi
cd "$root"
tags=nobadger,nomysql,nopgx,nostrtools
# The suite's file builds only with the nostrtools tag: vet it here.
go vet -tags "$tags" ./interop/nostr/
go test -tags "$tags" -count=1 "$@" ./interop/nostr/

#!/usr/bin/env bash
# Checks Hearth's GraphQL API against Inboxt's (Inboxt/inboxt @ 45f4314,
# v1.1.1): its 42 client operation documents validate against Hearth's
# schema, findBreakingChanges(inboxt, hearth) is empty, and every operation
# Inboxt lets API tokens run, sent to a Caddy built from this tree, answers
# in shapes Inboxt's schema carries (see README.md).
#
#   bash interop/inboxt/run.sh      # from anywhere; needs Go, Node and npm
#
# Env: PORT (18180), ADMIN (localhost:12119).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PORT=${PORT:-18180}
ADMIN=${ADMIN:-localhost:12119}
SITE=http://localhost:$PORT

. "$here/../lib.sh"
interop_start
{ caddy_global; cat <<CADDY; } >"$work/Caddyfile"
http://localhost:$PORT {
	handle /article.html {
		header Content-Type "text/html; charset=utf-8"
		respond "<html><head><title>Sourdough</title></head><body><article><h1>Sourdough</h1><p>A starter, flour and water, and a long slow rise: sourdough takes patience more than skill, and every loaf teaches something.</p><p>Feed the starter the night before.</p></article></body></html>"
	}
	hearth_graphql {
		allow_private_addresses
	}
}
CADDY
start_caddy
token=$(member_token inboxt interop)
status=0
SITE=$SITE TOKEN=$token node "$here/run.mjs" || status=$?
finish $status

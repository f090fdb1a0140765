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
repo=$(cd "$here/../.." && pwd)
PORT=${PORT:-18180}
ADMIN=${ADMIN:-localhost:12119}
SITE=http://localhost:$PORT

(cd "$here" && npm ci --no-audit --no-fund --silent)
work=$(mktemp -d)
caddy_pid=
trap '[ -n "$caddy_pid" ] && kill $caddy_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
(cd "$repo" && go build -tags nobadger,nomysql,nopgx -o "$work/caddy" ./cmd/caddy)
cat > "$work/Caddyfile" <<CADDY
{
	admin $ADMIN
	http_port $PORT
	log {
		level ERROR
	}
	hearth {
		storage_dir $work/store
	}
}
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
"$work/caddy" run --config "$work/Caddyfile" >"$work/caddy.log" 2>&1 &
caddy_pid=$!
for _ in $(seq 100); do curl -fs "$SITE/article.html" >/dev/null && break; sleep 0.1; done
echo "interop pass" | "$work/caddy" hearth member add inboxt --password-stdin --address "$ADMIN" >/dev/null
token=$("$work/caddy" hearth token create inboxt --name interop --expires 1d --address "$ADMIN")
status=0
SITE=$SITE TOKEN=$token node "$here/run.mjs" || status=$?
if [ $status -ne 0 ]; then
	echo "--- caddy log" >&2
	tail -50 "$work/caddy.log" >&2
fi
exit $status

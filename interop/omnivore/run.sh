#!/usr/bin/env bash
# Omnivore's note-taking integrations against Hearth: @omnivore-app/api
# 1.0.4 from npm (package-lock.json), driven with the calls of the Obsidian
# plugin (omnivore-app/obsidian-omnivore @ 619013b) and the Logseq plugin
# (omnivore-app/logseq-omnivore @ 0174149), against a Caddy built from this
# tree (see README.md).
#
#   bash interop/omnivore/run.sh      # from anywhere; needs Go, Node and npm
#
# Env: PORT (18380), ADMIN (localhost:12319), SLOW_PORT (18381: a page
# served after a delay, so the content download is polled while its fetch
# runs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
PORT=${PORT:-18380}
ADMIN=${ADMIN:-localhost:12319}
SLOW_PORT=${SLOW_PORT:-18381}
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
	log {
		output file $work/access.log
	}
	hearth_graphql {
		allow_private_addresses
	}
}
CADDY
"$work/caddy" run --config "$work/Caddyfile" >"$work/caddy.log" 2>&1 &
caddy_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "$SITE/api/graphql" && break; sleep 0.1; done
echo "interop pass" | "$work/caddy" hearth member add omnivore --password-stdin --address "$ADMIN" >/dev/null
token=$("$work/caddy" hearth token create omnivore --name interop --expires 1d --address "$ADMIN")
status=0
SITE=$SITE TOKEN=$token SLOW_PORT=$SLOW_PORT node "$here/run.mjs" || status=$?
# The plugins' own code (plugins/run.mjs), for a member of its own.
echo "interop pass" | "$work/caddy" hearth member add plugins --password-stdin --address "$ADMIN" >/dev/null
plugins_token=$("$work/caddy" hearth token create plugins --name plugins --expires 1d --address "$ADMIN")
SITE=$SITE TOKEN=$plugins_token node "$here/plugins/run.mjs" || status=$?
# The API keys and the content links' capabilities never reach a log.
if grep -l -e "$token" -e "$plugins_token" -e "/api/content/download/cl_" "$work/access.log" "$work/caddy.log" >&2; then
	echo "FAIL a secret is in the log above" >&2
	status=1
else
	echo "ok   the access log holds neither the key nor a content link ($(grep -c '"/api/' "$work/access.log") API requests logged)"
fi
if [ $status -ne 0 ]; then
	echo "--- caddy log" >&2
	tail -50 "$work/caddy.log" >&2
fi
exit $status

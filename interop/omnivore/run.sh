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
# served once its content download has answered 404, so the download is
# polled while its fetch runs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PORT=${PORT:-18380}
ADMIN=${ADMIN:-localhost:12319}
SLOW_PORT=${SLOW_PORT:-18381}
SITE=http://localhost:$PORT

. "$here/../lib.sh"
interop_start
{ caddy_global; cat <<CADDY; } >"$work/Caddyfile"
http://localhost:$PORT {
	log {
		output file $work/access.log
	}
	hearth_graphql {
		allow_private_addresses
	}
}
CADDY
start_caddy
token=$(member_token omnivore interop)
status=0
SITE=$SITE TOKEN=$token SLOW_PORT=$SLOW_PORT node "$here/run.mjs" || status=$?
# The plugins' own code (plugins/run.mjs), for a member of its own.
plugins_token=$(member_token plugins plugins)
SITE=$SITE TOKEN=$plugins_token node "$here/plugins/run.mjs" || status=$?
# The API keys and the content links' capabilities never reach a log.
if grep -l -e "$token" -e "$plugins_token" -e "/api/content/download/cl_" "$work/access.log" "$work/caddy.log" >&2; then
	echo "FAIL a secret is in the log above" >&2
	status=1
else
	echo "ok   the access log holds neither the key nor a content link ($(grep -c '"/api/' "$work/access.log") API requests logged)"
fi
finish $status

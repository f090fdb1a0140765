#!/usr/bin/env bash
# Runs real Mastodon clients (toot, Mastodon.py, megalodon, masto) against a
# Caddy built from this tree: builds it, starts it from a Caddyfile on
# 127.0.0.1:$PORT (admin $ADMIN), adds a member with the `caddy hearth`
# CLI, runs each client, stops Caddy. Exits non-zero, naming the client,
# if any client fails. See README.md.
#
# Needs: Go, python3 with toot and python3-mastodon (Debian), Node.js with
# this folder's npm packages (npm ci, run here when node_modules is absent).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PORT=${HEARTH_INTEROP_PORT:-18080}
ADMIN=${HEARTH_INTEROP_ADMIN:-localhost:12019}

# The Debian packages install into the system Python, whatever python3 is
# first on PATH.
PY=${HEARTH_INTEROP_PYTHON:-/usr/bin/python3}
export HEARTH_INTEROP_PYTHON=$PY
missing=()
command -v toot >/dev/null || missing+=("toot (apt-get install toot)")
"$PY" -c 'import mastodon' 2>/dev/null || missing+=("Mastodon.py for $PY (apt-get install python3-mastodon)")
command -v node >/dev/null || missing+=("Node.js")
if [ ${#missing[@]} -gt 0 ]; then
	printf 'interop/mastodon: missing %s\n' "${missing[@]}" >&2
	exit 1
fi
if [ ! -d "$here/node_modules/megalodon" ] || [ ! -d "$here/node_modules/masto" ]; then
	(cd "$here" && npm ci --no-audit --no-fund)
fi

tmp=$(mktemp -d)
caddy_pid=
cleanup() {
	if [ -n "$caddy_pid" ]; then
		kill "$caddy_pid" 2>/dev/null || true
		wait "$caddy_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "interop/mastodon: building Caddy from $root"
(cd "$root" && go build -tags nobadger,nomysql,nopgx -o "$tmp/caddy" ./cmd/caddy)

cat >"$tmp/Caddyfile" <<CADDY
{
	admin $ADMIN
	auto_https off
	storage file_system $tmp/caddy-data
	hearth {
		storage_dir $tmp/hearth
	}
}
http://127.0.0.1:$PORT {
	bind 127.0.0.1
	hearth_oauth {
		instance_title "Hearth interop"
		# Four clients register from one address; the default (5 per 10m,
		# as Mastodon) would allow a single run only.
		registration_limit 50 10m
	}
}
# The same store under another name with a tight token limit, for
# Mastodon.py's rate-limit handling (it sleeps until X-RateLimit-Reset).
http://localhost:$PORT {
	bind 127.0.0.1
	hearth_oauth {
		token_limit 2 2s
	}
}
CADDY

base="http://127.0.0.1:$PORT"
export HEARTH_INTEROP_LIMITED_URL="http://localhost:$PORT"
HOME="$tmp" XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" \
	"$tmp/caddy" run --config "$tmp/Caddyfile" >"$tmp/caddy.log" 2>&1 &
caddy_pid=$!
for _ in $(seq 1 300); do # up to a minute on a loaded machine
	if curl -fs -o /dev/null "$base/api/v1/instance" 2>/dev/null; then
		break
	fi
	if ! kill -0 "$caddy_pid" 2>/dev/null; then
		echo "interop/mastodon: Caddy did not start:" >&2
		cat "$tmp/caddy.log" >&2
		exit 1
	fi
	sleep 0.2
done
curl -fsS -o /dev/null "$base/api/v1/instance" || { echo "interop/mastodon: Caddy does not answer on $base" >&2; cat "$tmp/caddy.log" >&2; exit 1; }

export HEARTH_USER=alice HEARTH_PASSWORD="interop correct horse battery"
printf '%s\n' "$HEARTH_PASSWORD" | "$tmp/caddy" hearth member add "$HEARTH_USER" --display-name Alice --password-stdin --address "$ADMIN"

failed=()
run() {
	local name=$1
	shift
	echo "interop/mastodon: --- $name"
	if ! "$@"; then
		failed+=("$name")
	fi
}
run "toot $(dpkg-query -W -f='${Version}' toot 2>/dev/null || true)" "$PY" "$here/toot_client.py" "127.0.0.1:$PORT"
run "Mastodon.py $(dpkg-query -W -f='${Version}' python3-mastodon 2>/dev/null || true)" "$PY" "$here/mastodonpy_client.py" "$base"
run "megalodon + masto (npm)" node "$here/node_clients.mjs" "$base"

if [ ${#failed[@]} -gt 0 ]; then
	echo "interop/mastodon: FAILED: ${failed[*]} (Caddy's log follows)" >&2
	tail -n 50 "$tmp/caddy.log" >&2
	exit 1
fi
echo "interop/mastodon: all clients passed"

#!/usr/bin/env bash
# Loads hearth_oauth in a real Caddy with wrk on loopback and prints each
# figure as a ratio against Caddy's own `respond` directive, served by the
# same binary with a body of the same size.
#
#   bash bench/oauth.sh            # from the repository root; needs wrk and curl
#
# Env: DURATION (default 10s), CONNS (default 32), THREADS (default 2),
# RSS_SMALL (default 100000) and RSS_LARGE (default 1000000) requests.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
RSS_SMALL=${RSS_SMALL:-100000}
RSS_LARGE=${RSS_LARGE:-1000000}
PORT=${PORT:-8091}
ADMIN=${ADMIN:-localhost:2091}
SITE=http://localhost:$PORT

command -v wrk >/dev/null || { echo "bench: install wrk (apt-get install wrk)" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill $caddy_pid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

mkdir -p bench/results
go build -tags nobadger,nomysql,nopgx -o bench/results/caddy ./cmd/caddy

caddyfile() { # $1: body of the respond route
	cat <<CADDY
{
	admin $ADMIN
	http_port $PORT
	log {
		level ERROR
	}
	hearth {
		storage_dir $work/data
		sync_writes ${SYNC_WRITES:-on}
	}
}
http://localhost:$PORT {
	handle /respond {
		respond "$1"
	}
	hearth_oauth {
		token_limit off
		registration_limit 1000 1m
	}
}
CADDY
}
caddyfile x > "$work/Caddyfile"
bench/results/caddy run --config "$work/Caddyfile" >"$work/caddy.log" 2>&1 &
caddy_pid=$!
for _ in $(seq 100); do curl -fs "$SITE/api/v1/instance" >/dev/null && break; sleep 0.1; done

# A member, an app and a member token through the real pages.
echo 'bench password 1' | bench/results/caddy hearth member add bench --password-stdin --address "$ADMIN" >/dev/null
app=$(curl -fs "$SITE/api/v1/apps" -d client_name=bench -d redirect_uris=urn:ietf:wg:oauth:2.0:oob -d 'scopes=read write')
client_id=$(sed -E 's/.*"client_id":"([^"]+)".*/\1/' <<<"$app")
client_secret=$(sed -E 's/.*"client_secret":"([^"]+)".*/\1/' <<<"$app")
jar=$work/cookies
curl -fs -c "$jar" -b "$jar" -o /dev/null -H "Origin: $SITE" "$SITE/auth/sign_in" \
	--data-urlencode username=bench --data-urlencode 'password=bench password 1'
code_page=$(curl -fs -c "$jar" -b "$jar" -H "Origin: $SITE" "$SITE/oauth/authorize" \
	-d client_id="$client_id" -d redirect_uri=urn:ietf:wg:oauth:2.0:oob -d response_type=code -d scope=read -d decision=approve)
code=$(grep -o 'hac_[A-Za-z0-9_-]*' <<<"$code_page" | head -1)
token=$(curl -fs "$SITE/oauth/token" -d grant_type=authorization_code -d client_id="$client_id" \
	-d client_secret="$client_secret" -d code="$code" -d redirect_uri=urn:ietf:wg:oauth:2.0:oob |
	sed -E 's/.*"access_token":"([^"]+)".*/\1/')

# The respond route gets a body as long as verify_credentials' answer.
vc_size=$(curl -fs -H "Authorization: Bearer $token" "$SITE/api/v1/accounts/verify_credentials" | wc -c)
caddyfile "$(head -c "$vc_size" /dev/zero | tr '\0' x)" > "$work/Caddyfile"
curl -fs "http://$ADMIN/load" -H 'Content-Type: text/caddyfile' --data-binary @"$work/Caddyfile"
[ "$(curl -fs "$SITE/respond" | wc -c)" = "$vc_size" ] || { echo "bench: respond body size mismatch" >&2; exit 1; }

# rps prints wrk's requests per second, and fails when any answer was not a
# 2xx/3xx (a 429 or 503 is fast and would pass for throughput).
rps() {
	local out
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "$@")
	if grep -q 'Non-2xx or 3xx responses' <<<"$out"; then
		echo "bench: wrk $*: $(grep 'Non-2xx or 3xx responses' <<<"$out")" >&2
		exit 1
	fi
	awk '/Requests\/sec/ {print $2}' <<<"$out"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f %%", 100 * a / b}'; }

respond=$(rps "$SITE/respond")
verify=$(rps -H "Authorization: Bearer $token" "$SITE/api/v1/accounts/verify_credentials")

# RSS is read after at least n requests in total, counted from what wrk
# reports (runs of one second until the count is reached).
count_rss() {
	local want=$1 done=0 out
	while [ "$done" -lt "$want" ]; do
		out=$(wrk -t"$THREADS" -c"$CONNS" -d1s -H "Authorization: Bearer $token" "$SITE/api/v1/accounts/verify_credentials")
		done=$(( done + $(awk '/requests in/ {print $1}' <<<"$out") ))
	done
	echo "$done $(awk '/VmRSS/ {print $2}' "/proc/$caddy_pid/status")"
}
read -r n_small rss_small < <(count_rss "$RSS_SMALL")
read -r n_large rss_large < <(count_rss "$(( RSS_LARGE - n_small ))")
n_large=$(( n_small + n_large ))

# Issuance last: the tokens it writes grow the store and the process, which
# would blur the RSS figures of verify_credentials above.
issue=$(BENCH_CLIENT_ID=$client_id BENCH_CLIENT_SECRET=$client_secret rps -s bench/client_credentials.lua "$SITE/oauth/token")

cat <<REPORT
bench/oauth.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, wrk -t$THREADS -c$CONNS -d$DURATION, body $vc_size bytes
respond (Caddy)                      $respond req/s
verify_credentials (valid token)     $verify req/s   $(ratio "$verify" "$respond") of respond   (target >= 70 %)
client_credentials token issuance    $issue req/s   $(ratio "$issue" "$respond") of respond   (target >= 30 %)
RSS after $n_small verify_credentials   $rss_small KiB
RSS after $n_large verify_credentials  $rss_large KiB   $(awk -v a="$rss_large" -v b="$rss_small" 'BEGIN {printf "%.2f", a / b}')x   (target <= 1.20x)
REPORT

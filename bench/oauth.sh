#!/usr/bin/env bash
# Loads hearth_oauth in a real Caddy with wrk on loopback and prints each
# figure as a ratio against Caddy's own `respond` directive, served by the
# same binary with a body of the same size.
#
#   bash bench/oauth.sh                      # from the repository root; needs wrk and curl
#   ENGINE=postgres bash bench/oauth.sh      # the store in PostgreSQL (Debian's postgresql)
#   ENGINE=postgres NODES=2 bash bench/oauth.sh   # two Caddy nodes on one database
#
# Env: DURATION (default 10s), CONNS (default 32), THREADS (default 2),
# RSS_SMALL (default 100000) and RSS_LARGE (default 1000000) requests;
# ENGINE badger (default) or postgres: bench/pgserver starts a PostgreSQL
# server (durable defaults: fsync and synchronous_commit on) on PG_PORT
# (default 15445); NODES 1 (default) or 2 (postgres only): a second Caddy
# from the same Caddyfile on PORT2, each node loaded by its own wrk with half
# the threads and connections, figures summed (no RSS figures then);
# LIMITS off (default: token_limit off, as before) or on (a token limit too
# high to refuse anything, so each token request pays the limit's count:
# in memory on Badger, a round trip on PostgreSQL).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
wrk_settings 32
RSS_SMALL=${RSS_SMALL:-100000}
RSS_LARGE=${RSS_LARGE:-1000000}
PORT=${PORT:-8091}
ADMIN=${ADMIN:-localhost:2091}
PORT2=${PORT2:-8093}
ADMIN2=${ADMIN2:-localhost:2093}
ENGINE=${ENGINE:-badger}
NODES=${NODES:-1}
LIMITS=${LIMITS:-off}
PG_PORT=${PG_PORT:-15445}
SITE=http://localhost:$PORT
case $ENGINE/$NODES in
badger/1 | postgres/1 | postgres/2) ;;
*) echo "bench: ENGINE=badger|postgres, NODES=1|2 (2 with postgres only)" >&2; exit 1 ;;
esac

bench_start
if [ "$ENGINE" = postgres ]; then
	start_pgserver
fi

caddyfile() { # $1: body of the respond route, $2: port, $3: admin address, $4: node name
	local store="storage_dir $work/data-$4
		sync_writes ${SYNC_WRITES:-on}" limit="token_limit off"
	if [ "$ENGINE" = postgres ]; then
		store="storage_dir $work/data-$4
		storage postgres {
			dsn {env.HEARTH_DATABASE_URL}
		}"
	fi
	[ "$LIMITS" = on ] && limit="token_limit 1000000000 5m"
	caddy_global "$3" "$2" "$store"
	cat <<CADDY
http://localhost:$2 {
	handle /respond {
		respond "$1"
	}
	hearth_oauth {
		$limit
		registration_limit 1000 1m
	}
}
CADDY
}
start_node() { # $1: port, $2: admin, $3: name; $! is its pid
	caddyfile x "$1" "$2" "$3" > "$work/Caddyfile-$3"
	"$caddy" run --config "$work/Caddyfile-$3" >"$work/caddy-$3.log" 2>&1 &
}
wait_node() { # $1: port
	for _ in $(seq 300); do curl -fs "http://localhost:$1/api/v1/instance" >/dev/null && return; sleep 0.1; done
	echo "bench: Caddy on port $1 does not answer:" >&2; cat "$work"/caddy-*.log >&2; exit 1
}
start_node "$PORT" "$ADMIN" a
caddy_pid=$!
wait_node "$PORT"
if [ "$NODES" = 2 ]; then
	start_node "$PORT2" "$ADMIN2" b
	caddy2_pid=$!
	wait_node "$PORT2"
fi

# A member, an app and a member token through the real pages.
register_app
sign_in_bench
code_page=$(curl -fs -c "$jar" -b "$jar" -H "Origin: $SITE" "$SITE/oauth/authorize" \
	-d client_id="$client_id" -d redirect_uri=urn:ietf:wg:oauth:2.0:oob -d response_type=code -d scope=read -d decision=approve)
code=$(grep -o 'hac_[A-Za-z0-9_-]*' <<<"$code_page" | head -1)
token=$(curl -fs "$SITE/oauth/token" -d grant_type=authorization_code -d client_id="$client_id" \
	-d client_secret="$client_secret" -d code="$code" -d redirect_uri=urn:ietf:wg:oauth:2.0:oob |
	sed -E 's/.*"access_token":"([^"]+)".*/\1/')

# The respond route gets a body as long as verify_credentials' answer.
vc_size=$(curl -fs -H "Authorization: Bearer $token" "$SITE/api/v1/accounts/verify_credentials" | wc -c)
nodes=("$PORT $ADMIN a")
[ "$NODES" = 2 ] && nodes+=("$PORT2 $ADMIN2 b")
for n in "${nodes[@]}"; do
	read -r port admin name <<<"$n"
	caddyfile "$(head -c "$vc_size" /dev/zero | tr '\0' x)" "$port" "$admin" "$name" > "$work/Caddyfile-$name"
	curl -fs "http://$admin/load" -H 'Content-Type: text/caddyfile' --data-binary @"$work/Caddyfile-$name"
	[ "$(curl -fs "http://localhost:$port/respond" | wc -c)" = "$vc_size" ] || { echo "bench: respond body size mismatch" >&2; exit 1; }
done

# load_rps prints wrk's requests per second (summed over the nodes, each loaded
# by its own wrk with its share of the threads and connections), and fails
# when any answer was not a 2xx/3xx (a 429 or 503 is fast and would pass
# for throughput). $1 is the path; the rest are wrk's options.
load_rps() {
	local path=$1 i=0 t=$THREADS c=$CONNS
	shift
	if [ "$NODES" = 2 ]; then t=$(( (THREADS + 1) / 2 )) c=$(( CONNS / 2 )); fi
	for n in "${nodes[@]}"; do
		read -r port _ _ <<<"$n"
		wrk -t"$t" -c"$c" -d"$DURATION" "$@" "http://localhost:$port$path" >"$work/wrk-$i" &
		i=$((i + 1))
	done
	wait # the wrk processes: rps runs in a command substitution's subshell
	local sum=0
	for f in "$work"/wrk-*; do
		if grep -q 'Non-2xx or 3xx responses' "$f"; then
			echo "bench: wrk $path: $(grep 'Non-2xx or 3xx responses' "$f")" >&2
			exit 1
		fi
		grep -q 'Requests/sec' "$f" || { echo "bench: wrk $path failed: $(cat "$f")" >&2; exit 1; }
		sum=$(awk -v s="$sum" '/Requests\/sec/ {printf "%.2f", s + $2}' "$f")
	done
	rm -f "$work"/wrk-*
	echo "$sum"
}
respond=$(load_rps /respond)
verify=$(load_rps /api/v1/accounts/verify_credentials -H "Authorization: Bearer $token")

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
rss_report=
if [ "$NODES" = 1 ]; then
	read -r n_small rss_small < <(count_rss "$RSS_SMALL")
	read -r n_large rss_large < <(count_rss "$(( RSS_LARGE - n_small ))")
	n_large=$(( n_small + n_large ))
	rss_report="RSS after $n_small verify_credentials   $rss_small KiB
RSS after $n_large verify_credentials  $rss_large KiB   $(awk -v a="$rss_large" -v b="$rss_small" 'BEGIN {printf "%.2f", a / b}')x   (target <= 1.20x)"
fi

# Issuance last: the tokens it writes grow the store and the process, which
# would blur the RSS figures of verify_credentials above.
issue=$(BENCH_CLIENT_ID=$client_id BENCH_CLIENT_SECRET=$client_secret load_rps /oauth/token -s bench/client_credentials.lua)

cat <<REPORT
bench/oauth.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, wrk -t$THREADS -c$CONNS -d$DURATION, body $vc_size bytes, ENGINE=$ENGINE NODES=$NODES LIMITS=$LIMITS, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end
respond (Caddy)                      $respond req/s
verify_credentials (valid token)     $verify req/s   $(pct "$verify" "$respond") of respond   (target >= 70 %)
client_credentials token issuance    $issue req/s   $(pct "$issue" "$respond") of respond   (target >= 30 %)
${rss_report}
REPORT

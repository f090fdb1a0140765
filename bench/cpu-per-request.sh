#!/usr/bin/env bash
# CPU time of one Caddy process per request (µs, from /proc/PID/stat) for
# Caddy's respond, hearth_oauth's verify_credentials and client_credentials
# issuance (sync_writes on), loaded by wrk on loopback. Unlike req/s, the CPU a
# request costs moves little with the load of other processes, so two builds
# can be compared on a busy machine: run them alternated.
#
#   bench/cpu-per-request.sh CADDY-BINARY NAME     # from the repository root; needs wrk, curl, bc
set -euo pipefail
CADDY=$(realpath "$1") name=$2
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_start
PORT=${PORT:-8191} ADMIN=${ADMIN:-localhost:2191}
SITE=http://localhost:$PORT
{ caddy_global "$ADMIN" "$PORT" "storage_dir $work/data"; cat <<CADDY; } > $work/Caddyfile
http://localhost:$PORT {
	handle /respond {
		respond "x"
	}
	hearth_oauth {
		token_limit off
		registration_limit 1000 1m
	}
}
CADDY
start_caddy "$SITE/api/v1/instance"
register_app
export BENCH_CLIENT_ID=$client_id BENCH_CLIENT_SECRET=$client_secret
tok=$(curl -fs "http://localhost:$PORT/oauth/token" -d grant_type=client_credentials -d client_id=$BENCH_CLIENT_ID -d client_secret=$BENCH_CLIENT_SECRET -d scope=read | sed -E 's/.*"access_token":"([^"]+)".*/\1/')
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' /proc/$caddy_pid/stat; }
measure() { # label, wrk args...
	local label=$1; shift
	local t0 t1 out n
	t0=$(cpu)
	out=$(wrk -t2 -c32 -d8s "$@")
	t1=$(cpu)
	n=$(awk '/requests in/{print $1}' <<<"$out")
	printf '%s %s: %.1f us cpu/req (%s req/s)\n' "$name" "$label" "$(echo "($t1-$t0)*1000000/$tck/$n" | bc -l)" "$(awk '/Requests\/sec/{print $2}' <<<"$out")"
}
wrk -t2 -c32 -d2s http://localhost:$PORT/respond >/dev/null
measure respond http://localhost:$PORT/respond
measure verify -H "Authorization: Bearer $tok" http://localhost:$PORT/api/v1/apps/verify_credentials
measure issuance -s bench/client_credentials.lua http://localhost:$PORT/oauth/token

#!/usr/bin/env bash
# Loads hearth_graphql in a real Caddy with wrk on loopback: the first page
# of 50 entries against Caddy's own `respond` (same binary, same body size),
# a page 90 % deep against the first page, and the first page with 1 k
# against 100 k saved items.
#
#   bash bench/graphql.sh          # from the repository root; needs wrk and curl
#   ENGINE=postgres LARGE=20000 bash bench/graphql.sh   # the store in PostgreSQL
#
# Env: DURATION (default 10s), CONNS (default 16), THREADS (default 2),
# SMALL (default 1000) and LARGE (default 100000) items, HIGHLIGHTS (20000),
# ROUNDS (default 2) alternating runs of each figure; ENGINE badger (default)
# or postgres: bench/pgserver starts PostgreSQL (durable defaults) on PG_PORT
# (default 15445) and each store is a table prefix in its database.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
wrk_settings 16 2
SMALL=${SMALL:-1000}
LARGE=${LARGE:-100000}
HIGHLIGHTS=${HIGHLIGHTS:-20000}
PORT=${PORT:-8092}
ADMIN=${ADMIN:-localhost:2092}
SITE=http://localhost:$PORT
ENGINE=${ENGINE:-badger}
PG_PORT=${PG_PORT:-15445}
case $ENGINE in badger | postgres) ;; *) echo "bench: ENGINE=badger|postgres" >&2; exit 1 ;; esac

bench_start gqlbench
if [ "$ENGINE" = postgres ]; then
	start_pgserver
fi

caddyfile() { # $1: store dir, $2: body of the respond route
	local store="storage_dir $1"
	if [ "$ENGINE" = postgres ]; then
		store="storage_dir $1
		storage postgres {
			dsn {env.HEARTH_DATABASE_URL}
			prefix $(basename "$1" | tr -c 'a-z0-9\n' _)
		}"
	fi
	caddy_global "$ADMIN" "$PORT" "$store"
	cat <<CADDY
http://localhost:$PORT {
	handle /respond {
		respond "$2"
	}
CADDY
	graphql_unlimited
}

# wrk's mean latency in microseconds.
latency_us() { awk '/^    Latency/ {v=$2; u=v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
	f = (u=="us") ? 1 : (u=="ms") ? 1000 : 1000000; printf "%.0f", v * f}'; }

run() { # $1: items; prints "first_rps first_us deep_rps deep_us respond_rps body_size"
	local items=$1 dir=$work/store-$1
	local pg=()
	if [ "$ENGINE" = postgres ]; then pg=(-postgres "$HEARTH_DATABASE_URL" -prefix "$(basename "$dir" | tr -c 'a-z0-9\n' _)"); fi
	bench/results/gqlbench seed -dir "$dir" -items "$items" -highlights "$HIGHLIGHTS" "${pg[@]}"
	caddyfile "$dir" x > "$work/Caddyfile"
	start_caddy "$SITE/respond"
	local token
	token=$("$caddy" hearth token create bench --name bench --expires never --address "$ADMIN" 2>/dev/null)
	local size
	size=$(BENCH_TOKEN=$token wrk -t1 -c1 -d1s -s bench/entries.lua "$SITE/api/graphql" >/dev/null;
		curl -fs "$SITE/api/graphql" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		--data "$(sed -n 's/^wrk.body = .\(.*\)'"'"' .. q .. .*$/\1/p' bench/entries.lua)"'{"first":50}}}' | wc -c)
	caddyfile "$dir" "$(head -c "$size" /dev/zero | tr '\0' x)" > "$work/Caddyfile"
	curl -fs "http://$ADMIN/load" -H 'Content-Type: text/caddyfile' --data-binary @"$work/Caddyfile"
	local deep
	deep=$(bench/results/gqlbench cursor -url "$SITE/api/graphql" -token "$token" -at 0.9)
	# respond, the first page and the deep page take turns ROUNDS times, and
	# each figure is the mean of its rounds, so that a neighbour's load on
	# the two cores falls on every side of a ratio.
	local sums="0 0 0 0 0" r
	for r in $(seq "$ROUNDS"); do
		local resp first deep_out
		resp=$(wrk_load "$SITE/respond")
		first=$(BENCH_TOKEN=$token wrk_load -s bench/entries.lua "$SITE/api/graphql")
		deep_out=$(BENCH_TOKEN=$token BENCH_AFTER=$deep wrk_load -s bench/entries.lua "$SITE/api/graphql")
		echo "$items items, round $r: respond $(rps <<<"$resp") req/s, first page $(rps <<<"$first") req/s $(latency_us <<<"$first") us, deep page $(rps <<<"$deep_out") req/s $(latency_us <<<"$deep_out") us" >&2
		sums=$(awk -v s="$sums" -v a="$(rps <<<"$first")" -v b="$(latency_us <<<"$first")" -v c="$(rps <<<"$deep_out")" \
			-v d="$(latency_us <<<"$deep_out")" -v e="$(rps <<<"$resp")" \
			'BEGIN {split(s, x, " "); printf "%f %f %f %f %f", x[1]+a, x[2]+b, x[3]+c, x[4]+d, x[5]+e}')
	done
	awk -v s="$sums" -v n="$ROUNDS" -v size="$size" \
		'BEGIN {split(s, x, " "); printf "%.2f %.0f %.2f %.0f %.2f %s\n", x[1]/n, x[2]/n, x[3]/n, x[4]/n, x[5]/n, size}'
	stop_caddy
}

read -r s_rps s_us s_deep_rps s_deep_us s_resp s_size < <(run "$SMALL")
read -r l_rps l_us l_deep_rps l_deep_us l_resp l_size < <(run "$LARGE")
cat <<REPORT
bench/graphql.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, wrk -t$THREADS -c$CONNS -d$DURATION x $ROUNDS rounds, $HIGHLIGHTS highlights, ENGINE=$ENGINE, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end
$LARGE items: respond ($l_size bytes)        $l_resp req/s
$LARGE items: first page of 50          $l_rps req/s, mean $l_us us   $(pct "$l_rps" "$l_resp") of respond (target >= 25 %)
$LARGE items: page at 90 %              $l_deep_rps req/s, mean $l_deep_us us   $(multiple "$l_deep_us" "$l_us") of the first page (target <= 1.2x)
$SMALL items: first page of 50           $s_rps req/s, mean $s_us us
first page, $LARGE vs $SMALL items: $(multiple "$l_us" "$s_us") latency (target <= 1.5x)
REPORT

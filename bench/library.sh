#!/usr/bin/env bash
# Loads the library pages of hearth_graphql in a real Caddy with wrk on
# loopback, as a signed-in member: the library page (the inbox, 50 items of
# LARGE saved), two search pages (label: and a rare word), and the reader
# page of a 5 KB article, each against Caddy's own `respond` serving a body
# of the same size in the same binary and run.
#
#   bash bench/library.sh          # from the repository root; needs wrk and curl
#   LARGE=10000 DURATION=5s bash bench/library.sh
#
# Env: DURATION (default 10s), CONNS (default 16), THREADS (default 2),
# LARGE (default 100000) items, ROUNDS (default 2) alternating runs of each
# figure, KEEP (a directory where the seeded store is kept and reused),
# CADDY (a caddy binary to run instead of building this tree's), PROFILE
# (a directory: after the rounds, a CPU profile of Caddy under wrk for each
# page, <page>.pprof, from the admin endpoint's /debug/pprof/profile).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
wrk_settings 16 2
LARGE=${LARGE:-100000}
PORT=${PORT:-8096}
ADMIN=${ADMIN:-localhost:2096}
SITE=http://localhost:$PORT
RARE=zanzibarite

bench_start gqlbench
keep=${KEEP:-$work}
mkdir -p "$keep"

dir=$keep/library-$LARGE
if [ ! -f "$dir.done" ]; then
	rm -rf "$dir"
	# A label on one item in 20, the rare word in 10 items, and a 5 KB
	# article as the newest item.
	bench/results/gqlbench seed -dir "$dir" -items "$LARGE" -highlights 1000 -label-every 20 -rare "$RARE" -article-bytes 5000
	touch "$dir.done"
fi

# $1: a name, $2: its body (one respond route per page measured, the body
# as long as that page).
caddyfile() {
	caddy_global "$ADMIN" "$PORT" "storage_dir $dir"
	cat <<CADDY
http://localhost:$PORT {
$(for r in "$@"; do printf '\thandle /respond/%s {\n\t\trespond "%s"\n\t}\n' "${r%%=*}" "${r#*=}"; done)
CADDY
	graphql_unlimited
}
caddyfile none=x >"$work/Caddyfile"
start_caddy "$SITE/respond/none"

# Sign in as the seeded member through the sign-in form, as a browser does.
cookie=$(curl -fs -o /dev/null -D - "$SITE/auth/sign_in" -H "Origin: $SITE" -H 'Sec-Fetch-Site: same-origin' \
	--data-urlencode username=bench --data-urlencode 'password=bench password 1' --data-urlencode return_to= |
	sed -n 's/^[Ss]et-[Cc]ookie: \([^;]*\).*/\1/p' | paste -sd ';' | sed 's/;/; /g')
[ -n "$cookie" ] || { echo "bench: sign-in gave no cookie" >&2; exit 1; }
get() { curl -fs "$SITE$1" -H "Cookie: $cookie"; }
item=$(get /library | grep -o 'href="/library/item/[^"?]*' | head -1 | sed 's/href="//')
[ -n "$item" ] || { echo "bench: no item on the library page" >&2; exit 1; }
pages=("library=/library" "label=/library?q=label:news" "rare=/library?q=$RARE" "reader=$item")
routes=()
for p in "${pages[@]}"; do
	name=${p%%=*} path=${p#*=}
	size=$(get "$path" | wc -c)
	routes+=("$name=$(head -c "$size" /dev/zero | tr '\0' x)")
	eval "size_$name=$size"
done
[ "$(get "/library?q=$RARE" | grep -c 'href="/library/item/')" -ge 10 ] || { echo "bench: the rare word found fewer than 10 items" >&2; exit 1; }
caddyfile "${routes[@]}" >"$work/Caddyfile"
curl -fs "http://$ADMIN/load" -H 'Content-Type: text/caddyfile' --data-binary @"$work/Caddyfile"

load() { wrk_load -H "Cookie: $cookie" "$SITE$1" | rps; } # $1: path
# Each page and its respond take turns ROUNDS times; each figure is the
# mean of its rounds, so that a neighbour's load falls on both sides.
declare -A sum
for r in $(seq "$ROUNDS"); do
	for p in "${pages[@]}"; do
		name=${p%%=*} path=${p#*=}
		a=$(load "/respond/$name") b=$(load "$path")
		echo "round $r: $name $b req/s, its respond $a req/s" >&2
		sum[r_$name]=$(awk -v s="${sum[r_$name]:-0}" -v a="$a" 'BEGIN {print s + a}')
		sum[p_$name]=$(awk -v s="${sum[p_$name]:-0}" -v a="$b" 'BEGIN {print s + a}')
	done
done
if [ -n "${PROFILE:-}" ]; then
	mkdir -p "$PROFILE"
	secs=${DURATION%s}
	for p in "${pages[@]}"; do
		name=${p%%=*} path=${p#*=}
		wrk -t"$THREADS" -c"$CONNS" -d"$((secs + 2))s" -H "Cookie: $cookie" "$SITE$path" >/dev/null &
		wrk_pid=$!
		sleep 1
		curl -fs -o "$PROFILE/$name.pprof" "http://$ADMIN/debug/pprof/profile?seconds=$secs"
		wait "$wrk_pid"
	done
	cp "$caddy" "$PROFILE/caddy"
fi
mean() { awk -v s="${sum[$1]}" -v n="$ROUNDS" 'BEGIN {printf "%.0f", s / n}'; }
lib=$(mean p_library)
echo "bench/library.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $LARGE items, wrk -t$THREADS -c$CONNS -d$DURATION x $ROUNDS rounds, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
printf '%-34s %6s req/s  respond (%s bytes) %6s req/s  %s of respond (target >= 25 %%)\n' "library page (inbox, 50 items)" "$lib" "$size_library" "$(mean r_library)" "$(pct "$lib" "$(mean r_library)")"
for n in label rare; do
	q=label:news; [ $n = rare ] && q=$RARE
	printf '%-34s %6s req/s  respond (%s bytes) %6s req/s  %s of respond, library page %s its time (target <= 1.5x)\n' \
		"search $q" "$(mean p_$n)" "$(eval echo \$size_$n)" "$(mean r_$n)" "$(pct "$(mean p_$n)" "$(mean r_$n)")" "$(multiple "$lib" "$(mean p_$n)")"
done
printf '%-34s %6s req/s  respond (%s bytes) %6s req/s  %s of respond (target >= 40 %%)\n' "reader page (5 KB article)" "$(mean p_reader)" "$size_reader" "$(mean r_reader)" "$(pct "$(mean p_reader)" "$(mean r_reader)")"

#!/usr/bin/env bash
# Loads hearth_directory's document in a real Caddy with wrk on loopback and
# prints it as a ratio against Caddy's own file_server serving a file with
# exactly the same bytes, from the same binary and site.
#
#   bash bench/directory.sh        # from the repository root; needs wrk and curl
#
# Env: DURATION (default 10s), CONNS (default 16), THREADS (default 2),
# AGENTS (default 10000), ROUNDS (default 2: file_server and directory
# alternate, and each figure sums its rounds, so a neighbour's load hits
# both sides alike), CADDY (a caddy binary to run instead of building this
# tree's).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
wrk_settings 16 2
AGENTS=${AGENTS:-10000}
PORT=${PORT:-8094}
ADMIN=${ADMIN:-localhost:2094}
SITE=http://localhost:$PORT

bench_start dirbench
mkdir -p "$work/static"

bench/results/dirbench seed -dir "$work/data" -agents "$AGENTS"
# No encode directive: neither side compresses. file_server and the
# directory both answer wrk's plain GET (no If-None-Match) with 200 and the
# whole body.
{ caddy_global "$ADMIN" "$PORT" "storage_dir $work/data"; cat <<CADDY; } >"$work/Caddyfile"
http://localhost:$PORT {
	handle /static.json {
		root * $work/static
		file_server
	}
	hearth_directory
}
CADDY
start_caddy "$SITE/directory.json"
curl -fs -o "$work/static/static.json" "$SITE/directory.json"
size=$(wc -c <"$work/static/static.json")
cmp -s "$work/static/static.json" <(curl -fs "$SITE/static.json") || { echo "bench: file_server bytes differ" >&2; exit 1; }
cmp -s "$work/static/static.json" <(curl -fs "$SITE/directory.json") || { echo "bench: the document changed" >&2; exit 1; }
for p in directory.json static.json; do
	if curl -fsI -H 'Accept-Encoding: gzip, br, zstd' "$SITE/$p" | grep -qi '^content-encoding'; then
		echo "bench: /$p is compressed" >&2; exit 1
	fi
done

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
static=0 dir=0 rounds=
for _ in $(seq "$ROUNDS"); do
	s=$(wrk_load "$SITE/static.json" | rps)
	d=$(wrk_load "$SITE/directory.json" | rps)
	rounds="$rounds  file_server $s / directory $d"
	static=$(awk -v a="$static" -v b="$s" 'BEGIN {print a + b}')
	dir=$(awk -v a="$dir" -v b="$d" 'BEGIN {print a + b}')
done
avg() { awk -v a="$1" -v n="$ROUNDS" 'BEGIN {printf "%.1f", a / n}'; }
mibs() { awk -v a="$1" -v n="$ROUNDS" -v s="$size" 'BEGIN {printf "%.0f", a / n * s / 1048576}'; }
cat <<REPORT
bench/directory.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $load_before before / $(cut -d' ' -f1-3 /proc/loadavg) after, wrk -t$THREADS -c$CONNS -d$DURATION x $ROUNDS rounds, $AGENTS agents, document $size bytes
rounds (req/s):$rounds
file_server (same bytes)      $(avg "$static") req/s   $(mibs "$static") MiB/s
hearth_directory              $(avg "$dir") req/s   $(mibs "$dir") MiB/s   $(pct "$dir" "$static") of file_server   (target >= 110 %)
REPORT

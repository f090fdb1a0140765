#!/usr/bin/env bash
# Search latency over HTTP: seeds the search corpus
# (bench/gqlbench/corpus.go) for one member, starts a real Caddy on it and
# prints the median latency of each query of the issue's table (first: 50),
# then the same searches in SQLite FTS5 (trigram tokenizer: the same
# substring semantics) and SQLite LIKE over the same corpus.
#
#   bash bench/search.sh               # from the repository root
#   ITEMS="10000 100000" RUNS=21 bash bench/search.sh
#   ITEMS=1000000 KEEP=/var/tmp/corpus bash bench/search.sh  # by hand, not in CI
#
# Env: ITEMS (default "10000 100000"), RUNS (21), SQLITE (1: also SQLite), PAIRS (1: also
# every pair of two filters), CADDY (a caddy binary to run instead of building this tree's: another
# version's, for a before/after),
# KEEP (a directory where the seeded stores are kept and reused).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ITEMS=${ITEMS:-10000 100000}
RUNS=${RUNS:-21}
SQLITE=${SQLITE:-1}
PORT=${PORT:-8095}
ADMIN=${ADMIN:-localhost:2095}
SITE=http://localhost:$PORT
bench_start gqlbench
keep=${KEEP:-$work}
mkdir -p "$keep"

for n in $ITEMS; do
	dir=$keep/store-$n
	if [ ! -f "$dir.json" ]; then
		rm -rf "$dir"
		bench/results/gqlbench seed -corpus -dir "$dir" -items "$n" -csv "$dir.csv"
	fi
	{ caddy_global "$ADMIN" "$PORT" "storage_dir $dir"; echo "http://localhost:$PORT {"; graphql_unlimited; } > "$work/Caddyfile"
	"$caddy" run --config "$work/Caddyfile" >"$work/caddy.log" 2>&1 &
	caddy_pid=$!
	token=
	for _ in $(seq 300); do
		token=$("$caddy" hearth token create bench --name "bench-$RANDOM" --expires never --address "$ADMIN" 2>/dev/null) && break
		sleep 0.2
	done
	echo "bench/search.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $n items ($(du -sh "$dir" | cut -f1) store), medians of $RUNS"
	bench/results/gqlbench search -url "$SITE/api/graphql" -token "$token" -info "$dir.json" -n "$RUNS" -pairs="${PAIRS:-0}"
	echo "caddy RSS after the queries: $(ps -o rss= -p $caddy_pid | awk '{printf "%.0f MB", $1/1024}')"
	stop_caddy
	if [ "$SQLITE" = 1 ] && command -v sqlite3 >/dev/null; then
		db=$dir.sqlite
		if [ ! -f "$db" ]; then
			sqlite3 "$db" <<SQL
CREATE TABLE items(id TEXT PRIMARY KEY, domain TEXT, title TEXT, description TEXT, text TEXT);
.mode csv
.import $dir.csv items
CREATE VIRTUAL TABLE fts USING fts5(title, description, text, content='items', content_rowid='rowid', tokenize='trigram');
INSERT INTO fts(fts) VALUES('rebuild');
CREATE INDEX items_domain ON items(domain);
SQL
		fi
		echo "SQLite $(sqlite3 --version | cut -d' ' -f1), same corpus ($(du -sh "$db" | cut -f1)), newest 50 matches, mean of 20 runs in one process (ms):"
		ms() { # $1: a statement; mean ms of 20 runs, less the process's start
			local t0 t1 t2
			t0=$(date +%s%N); echo "SELECT 1;" | sqlite3 "$db" >/dev/null; t1=$(date +%s%N)
			for _ in $(seq 20); do echo "$1"; done | sqlite3 "$db" >/dev/null; t2=$(date +%s%N)
			awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {v = ((c-b) - (b-a)) / 20 / 1e6; printf "%.2f", (v < 0 ? 0 : v)}'
		}
		for w in lantern quasquillion zanzibarite xylocarpqz; do
			printf '  %-12s fts5 trigram %8s   LIKE %8s\n' "$w" \
				"$(ms "SELECT rowid FROM fts WHERE fts MATCH '\"$w\"' ORDER BY rowid DESC LIMIT 50;")" \
				"$(ms "SELECT rowid FROM items WHERE title LIKE '%$w%' OR description LIKE '%$w%' OR text LIKE '%$w%' ORDER BY rowid DESC LIMIT 50;")"
		done
		printf '  %-12s index        %8s\n' "site: rare" "$(ms "SELECT rowid FROM items WHERE domain = 'rare-domain.org' ORDER BY rowid DESC LIMIT 50;")"
	fi
done

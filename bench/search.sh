#!/usr/bin/env bash
# Search latency over HTTP (issue 15): seeds the search corpus
# (bench/gqlbench/corpus.go) for one member, starts a real Caddy on it and
# prints the median latency of each query of the issue's table (first: 50),
# then the same searches in SQLite FTS5 (trigram tokenizer: the same
# substring semantics) and SQLite LIKE over the same corpus.
#
#   bash bench/search.sh               # from the repository root
#   ITEMS="10000 100000" RUNS=21 bash bench/search.sh
#   ITEMS=1000000 KEEP=/var/tmp/corpus bash bench/search.sh  # by hand, not in CI
#
# Env: ITEMS (default "10000 100000"), RUNS (21), SQLITE (1: also SQLite),
# KEEP (a directory where the seeded stores are kept and reused).
set -euo pipefail
cd "$(dirname "$0")/.."
ITEMS=${ITEMS:-10000 100000}
RUNS=${RUNS:-21}
SQLITE=${SQLITE:-1}
PORT=${PORT:-8095}
ADMIN=${ADMIN:-localhost:2095}
SITE=http://localhost:$PORT
work=$(mktemp -d)
keep=${KEEP:-$work}
mkdir -p "$keep"
caddy_pid=
trap '[ -n "$caddy_pid" ] && kill $caddy_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p bench/results
go build -tags nobadger,nomysql,nopgx -o bench/results/caddy ./cmd/caddy
go build -o bench/results/gqlbench ./bench/gqlbench

for n in $ITEMS; do
	dir=$keep/store-$n
	if [ ! -f "$dir.json" ]; then
		rm -rf "$dir"
		bench/results/gqlbench seed -corpus -dir "$dir" -items "$n" -csv "$dir.csv"
	fi
	cat > "$work/Caddyfile" <<CADDY
{
	admin $ADMIN
	http_port $PORT
	log {
		level ERROR
	}
	hearth {
		storage_dir $dir
	}
}
http://localhost:$PORT {
	hearth_graphql {
		token_rate_limit off
		member_rate_limit off
	}
}
CADDY
	bench/results/caddy run --config "$work/Caddyfile" >"$work/caddy.log" 2>&1 &
	caddy_pid=$!
	token=
	for _ in $(seq 300); do
		token=$(bench/results/caddy hearth token create bench --name "bench-$RANDOM" --expires never --address "$ADMIN" 2>/dev/null) && break
		sleep 0.2
	done
	echo "bench/search.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $n items ($(du -sh "$dir" | cut -f1) store), medians of $RUNS"
	bench/results/gqlbench search -url "$SITE/api/graphql" -token "$token" -info "$dir.json" -n "$RUNS"
	echo "caddy RSS after the queries: $(ps -o rss= -p $caddy_pid | awk '{printf "%.0f MB", $1/1024}')"
	kill $caddy_pid; wait $caddy_pid 2>/dev/null || true; caddy_pid=
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
		echo "SQLite $(sqlite3 --version | cut -d' ' -f1), same corpus ($(du -sh "$db" | cut -f1)), medians of 5 (ms):"
		for w in lantern quasquillion zanzibarite xylocarpqz; do
			for kind in fts like; do
				if [ $kind = fts ]; then
					sql="SELECT rowid FROM fts WHERE fts MATCH '\"$w\"' ORDER BY rowid DESC LIMIT 50;"
				else
					sql="SELECT rowid FROM items WHERE title LIKE '%$w%' OR description LIKE '%$w%' OR text LIKE '%$w%' ORDER BY rowid DESC LIMIT 50;"
				fi
				med=$( (echo .timer on; for _ in 1 2 3 4 5; do echo "$sql"; done) | sqlite3 "$db" 2>&1 |
					awk '/^Run Time/ {print $4*1000}' | sort -n | sed -n 3p)
				printf '  %-12s %-5s %8.2f\n' "$w" "$kind" "$med"
			done
		done
	fi
done

#!/usr/bin/env bash
# Imports a 10,000-row Readwise Reader CSV and Pocket's zip of 10,000 rows
# with 5,000 highlights through `caddy hearth import` into a real Caddy,
# each RUNS times on a fresh store, and prints for each run the time until
# the rows are written (the command with --no-fetch-wait, and the job's own
# from its creation to its end) and the memory of the Caddy process doing
# the import, sampled every 10 ms by gqlbench peakmem: its peak resident
# size (VmHWM, what top and /usr/bin/time -v report; reset before the
# import), the largest anonymous resident memory (RssAnon: heap, stacks,
# runtime; Badger's memtables, caches and table builders are in the heap)
# and file-backed resident part (RssFile: the binary's pages and Badger's
# memory-mapped files, page cache the kernel takes back under pressure)
# seen, the same three of the idle Caddy before the import, and where the
# file-backed pages were when they were most (the binary, Badger's
# memtable logs *.mem, value logs *.vlog and tables *.sst); and the CPU
# (user + system) the Caddy process used from the command's start to its
# end, and to a second after it (the search indexer's catch-up with the
# imported texts, the background fetches' start).
#
# By default Caddy runs with Hearth's and Go's defaults (no GOMEMLIMIT: Caddy
# sets 90 % of the machine's memory, and Hearth lowers it while an import
# runs; docs/operations.md, "Memory on a small machine").
#
#   bash bench/imports.sh          # from the repository root; needs curl and GNU time
#   RUNS=5 ROWS=20000 bash bench/imports.sh
#   GOMEMLIMIT=64MiB STORE_OPTIONS="memtable_size 4MiB" bash bench/imports.sh
#
# Env: RUNS (default 3), ROWS (default 10000), CADDY (a caddy binary to
# run instead of building this tree's), GOMEMLIMIT (default unset; set, it
# is in Caddy's environment, and Hearth leaves the limit alone), STORE_OPTIONS
# (more lines of the hearth block; default none), HEAPPROFILES (a
# directory: heap profiles of Caddy taken from its admin API every 200 ms
# during each import, FILE-RUN-N.pprof, for
# go tool pprof -sample_index=inuse_space; the heap as of the last
# collection), LOGS (a directory: Caddy's log of each import,
# FILE-RUN.log).
# The imported addresses are on example.org: the background fetches that
# follow (one a second, one host) are not waited for.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${RUNS:-3}
limit=${GOMEMLIMIT:-}
unset GOMEMLIMIT # Caddy's alone, not the builds'
STORE_OPTIONS=${STORE_OPTIONS:-}
ROWS=${ROWS:-10000}
PORT=${PORT:-8097}
ADMIN=${ADMIN:-localhost:2097}
SITE=http://localhost:$PORT

[ -x /usr/bin/time ] || { echo "bench: install GNU time (apt-get install time)" >&2; exit 1; }
bench_start gqlbench
if [ -n "$limit" ]; then
	printf '#!/bin/sh\nGOMEMLIMIT=%s exec %s "$@"\n' "$limit" "$(realpath "$caddy")" >"$work/caddy"
	chmod +x "$work/caddy"
	caddy=$work/caddy
fi
bench/results/gqlbench importfile -format readwise-reader -rows "$ROWS" -o "$work/readwise-reader.csv"
bench/results/gqlbench importfile -format pocket-zip -rows "$ROWS" -o "$work/pocket.zip"

# the CPU time (user + system, clock ticks) process $1 has used so far
# (proc(5): fields 14 and 15 of /proc/PID/stat, counted after the command's
# name, which ends at the last parenthesis)
proc_cpu() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
# seconds between two proc_cpu readings
cpu_seconds() { awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }'; }

# seconds between two RFC 3339 times of the admin API's answer
job_seconds() {
	local j created finished
	j=$(curl -fs "http://$ADMIN/hearth/members/bench/imports")
	created=$(grep -o '"created_at":"[^"]*"' <<<"$j" | head -1 | cut -d'"' -f4)
	finished=$(grep -o '"finished_at":"[^"]*"' <<<"$j" | head -1 | cut -d'"' -f4)
	awk -v a="$(date -d "$created" +%s.%N)" -v b="$(date -d "$finished" +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); GOMEMLIMIT=${limit:-(unset)}; store options: ${STORE_OPTIONS:-(defaults)}"
for file in readwise-reader.csv pocket.zip; do
	for run in $(seq "$RUNS"); do
		dir=$work/store-$run
		rm -rf "$dir" "$dir-imports"
		{
			caddy_global "$ADMIN" "$PORT" "storage_dir $dir
		${STORE_OPTIONS:-}"
			printf 'http://localhost:%s {\n' "$PORT"
			graphql_unlimited
		} >"$work/Caddyfile"
		start_caddy "$SITE/auth/sign_in"
		echo 'bench password 1' | "$caddy" hearth member add --address "$ADMIN" --password-stdin bench >/dev/null
		# A new process for the import: the memory the password's hash took
		# (Argon2) would otherwise still be the process's.
		stop_caddy
		start_caddy "$SITE/auth/sign_in"
		sleep 1
		bench/results/gqlbench peakmem -pid "$caddy_pid" >"$work/peak" &
		peak_pid=$!
		prof_pid=
		if [ -n "${HEAPPROFILES:-}" ]; then
			mkdir -p "$HEAPPROFILES"
			(n=0; while :; do n=$((n + 1)); curl -fs -o "$HEAPPROFILES/$file-$run-$n.pprof" "http://$ADMIN/debug/pprof/heap"; sleep 0.2; done) &
			prof_pid=$!
		fi
		sleep 0.1
		cpu0=$(proc_cpu "$caddy_pid")
		/usr/bin/time -f '%e' -o "$work/time" "$caddy" hearth import --address "$ADMIN" --member bench --no-fetch-wait \
			"$work/$file" >"$work/import.out" 2>&1 || { cat "$work/import.out" >&2; exit 1; }
		cpu1=$(proc_cpu "$caddy_pid")
		kill -TERM "$peak_pid"
		wait "$peak_pid"
		sleep 1
		cpu2=$(proc_cpu "$caddy_pid")
		[ -z "$prof_pid" ] || { kill "$prof_pid"; wait "$prof_pid" 2>/dev/null || true; }
		grep -q "^$ROWS new, 0 already saved, 0 not imported" "$work/import.out" ||
			{ echo "bench: the import did not write every row:" >&2; cat "$work/import.out" >&2; exit 1; }
		printf '%-20s run %d: command %s s, job %s s, cpu %s s (%s s to a second after), %s (MiB), load %s\n' "$file" "$run" \
			"$(cat "$work/time")" "$(job_seconds)" "$(cpu_seconds "$cpu0" "$cpu1")" "$(cpu_seconds "$cpu0" "$cpu2")" \
			"$(cat "$work/peak")" "$(cut -d' ' -f1 /proc/loadavg)"
		stop_caddy
		[ -z "${LOGS:-}" ] || { mkdir -p "$LOGS"; cp "$work/caddy.log" "$LOGS/$file-$run.log"; }
	done
done

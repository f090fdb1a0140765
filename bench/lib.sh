# Shared by the bench/*.sh scripts, sourced from the repository root:
#   . bench/lib.sh

# need_wrk stops the script when wrk is missing.
need_wrk() {
	command -v wrk >/dev/null || { echo "bench: install wrk (apt-get install wrk)" >&2; exit 1; }
}

# caddy_global prints a Caddyfile's global options: the admin API on $1,
# plain HTTP on port $2, only errors logged (a log line per request would
# weigh on the figures), and the hearth app with the store lines $3.
caddy_global() {
	cat <<CADDY
{
	admin $1
	http_port $2
	log {
		level ERROR
	}
	hearth {
		$3
	}
}
CADDY
}

# start_pgserver builds bench/pgserver and starts it on $PG_PORT with the
# log and DSN in $work; sets pg_pid (for the script's cleanup) and exports
# HEARTH_DATABASE_URL, or stops the script when PostgreSQL does not start.
start_pgserver() {
	go build -o bench/results/pgserver ./bench/pgserver
	bench/results/pgserver -port "$PG_PORT" >"$work/dsn" 2>"$work/pg.log" &
	pg_pid=$!
	for _ in $(seq 300); do [ -s "$work/dsn" ] && break; kill -0 "$pg_pid" 2>/dev/null || break; sleep 0.1; done
	[ -s "$work/dsn" ] || { echo "bench: PostgreSQL did not start:" >&2; cat "$work/pg.log" >&2; exit 1; }
	export HEARTH_DATABASE_URL
	HEARTH_DATABASE_URL=$(cat "$work/dsn")
}

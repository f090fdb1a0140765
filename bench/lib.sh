# Shared by the bench/*.sh scripts, sourced from the repository root:
#   . bench/lib.sh

# need_wrk stops the script when wrk is missing.
need_wrk() {
	command -v wrk >/dev/null || { echo "bench: install wrk (apt-get install wrk)" >&2; exit 1; }
}

# wrk_settings sets the load every wrk script reads from its environment,
# with its defaults: DURATION (10s), CONNS ($1), THREADS (2) and ROUNDS ($2,
# else 1), and stops the script when wrk is missing.
wrk_settings() {
	DURATION=${DURATION:-10s}
	CONNS=${CONNS:-$1}
	THREADS=${THREADS:-2}
	ROUNDS=${ROUNDS:-${2:-1}}
	need_wrk
}

# wrk_load runs wrk with THREADS, CONNS and DURATION and its arguments, and
# prints wrk's report; it stops the script when any answer was not a 2xx
# or 3xx (a refusal, or a redirect to sign-in, is fast and would pass for
# throughput).
wrk_load() {
	local out
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "$@")
	if grep -q 'Non-2xx or 3xx responses' <<<"$out"; then
		echo "bench: wrk $*: $(grep 'Non-2xx or 3xx responses' <<<"$out")" >&2
		exit 1
	fi
	printf '%s\n' "$out"
}

# rps prints the requests per second of the wrk report on its input.
rps() { awk '/Requests\/sec/ {print $2}'; }

# pct prints $1 as a percentage of $2; multiple prints $1 / $2 as "1.23x".
pct() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f %%", 100 * a / b}'; }
multiple() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }

# bench_start makes the scratch directory $work, builds this tree's Caddy
# into the results folder unless CADDY names another Caddy binary to run
# ($caddy is the one to run), and builds the Go tools of bench named in the
# arguments into the results folder too. When the script ends, the Caddy nodes in $caddy_pid and
# $caddy2_pid and the PostgreSQL in $pg_pid are stopped, then $work removed.
bench_start() {
	work=$(mktemp -d)
	caddy_pid= caddy2_pid= pg_pid=
	trap bench_stop EXIT
	mkdir -p bench/results
	caddy=${CADDY:-bench/results/caddy}
	[ -n "${CADDY:-}" ] || go build -tags nobadger,nomysql,nopgx -o bench/results/caddy ./cmd/caddy
	local tool
	for tool in "$@"; do go build -o "bench/results/$tool" "./bench/$tool"; done
}

bench_stop() {
	local p
	for p in $caddy_pid $caddy2_pid $pg_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}

# start_caddy runs $caddy on $work/Caddyfile (its log in $work/caddy.log),
# sets caddy_pid and waits until the URL $1 answers; when it does not, it
# stops the script with Caddy's log.
start_caddy() {
	"$caddy" run --config "$work/Caddyfile" >"$work/caddy.log" 2>&1 &
	caddy_pid=$!
	for _ in $(seq 300); do curl -fs -o /dev/null "$1" && return; sleep 0.1; done
	echo "bench: Caddy does not answer $1:" >&2
	cat "$work/caddy.log" >&2
	exit 1
}

# stop_caddy stops the Caddy started by start_caddy.
stop_caddy() {
	kill "$caddy_pid"
	wait "$caddy_pid" 2>/dev/null || true
	caddy_pid=
}

# sign_in_bench adds the member bench through the admin API on $ADMIN and
# signs it in through the real sign-in page of $SITE: its session cookie is
# in the cookie jar $jar ($work/cookies).
sign_in_bench() {
	echo 'bench password 1' | "$caddy" hearth member add bench --password-stdin --address "$ADMIN" >/dev/null
	jar=$work/cookies
	curl -fs -c "$jar" -b "$jar" -o /dev/null -H "Origin: $SITE" "$SITE/auth/sign_in" \
		--data-urlencode username=bench --data-urlencode 'password=bench password 1'
}

# register_app registers an OAuth app on $SITE (POST /api/v1/apps, scopes
# read write, the out-of-band redirect URI) and sets client_id and
# client_secret.
register_app() {
	local app
	app=$(curl -fs "$SITE/api/v1/apps" -d client_name=bench -d redirect_uris=urn:ietf:wg:oauth:2.0:oob -d 'scopes=read write')
	client_id=$(sed -E 's/.*"client_id":"([^"]+)".*/\1/' <<<"$app")
	client_secret=$(sed -E 's/.*"client_secret":"([^"]+)".*/\1/' <<<"$app")
}

# graphql_unlimited prints a hearth_graphql directive without the per-token
# and per-member rate limits, which a benchmark's one client would hit, and
# closes the site block.
graphql_unlimited() {
	cat <<CADDY
	hearth_graphql {
		token_rate_limit off
		member_rate_limit off
	}
}
CADDY
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

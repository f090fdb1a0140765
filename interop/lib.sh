# Shared by the interop suites that drive a Caddy built from this tree with
# Node clients (inboxt/run.sh, omnivore/run.sh), sourced once here (the
# suite's folder), PORT, ADMIN and SITE are set:
#   . "$here/../lib.sh"

# interop_start installs the suite's npm packages, makes the scratch
# directory $work (removed when the script ends, after the Caddy of
# $caddy_pid is stopped) and builds this tree's Caddy into $work/caddy.
interop_start() {
	(cd "$here" && npm ci --no-audit --no-fund --silent)
	work=$(mktemp -d)
	caddy_pid=
	trap '[ -n "$caddy_pid" ] && kill $caddy_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
	(cd "$here/../.." && go build -tags nobadger,nomysql,nopgx -o "$work/caddy" ./cmd/caddy)
}

# caddy_global prints the Caddyfile's global options: the admin API on
# $ADMIN, plain HTTP on $PORT, only errors logged, the store in $work/store.
caddy_global() {
	cat <<CADDY
{
	admin $ADMIN
	http_port $PORT
	log {
		level ERROR
	}
	hearth {
		storage_dir $work/store
	}
}
CADDY
}

# start_caddy runs $work/caddy on $work/Caddyfile (its log in
# $work/caddy.log), sets caddy_pid and waits until the site answers.
start_caddy() {
	"$work/caddy" run --config "$work/Caddyfile" >"$work/caddy.log" 2>&1 &
	caddy_pid=$!
	# Up to a minute: a loaded machine can take a while to open the store.
	for _ in $(seq 600); do
		curl -s -o /dev/null "$SITE/" && break
		kill -0 "$caddy_pid" 2>/dev/null || break
		sleep 0.1
	done
}

# member_token adds the member $1 (password "interop pass") with the CLI
# and prints a new API token of theirs named $2, valid a day.
member_token() {
	echo "interop pass" | "$work/caddy" hearth member add "$1" --password-stdin --address "$ADMIN" >/dev/null || return
	"$work/caddy" hearth token create "$1" --name "$2" --expires 1d --address "$ADMIN"
}

# finish exits with status $1, after the end of Caddy's log when it is not 0.
finish() {
	if [ "$1" -ne 0 ]; then
		echo "--- caddy log" >&2
		tail -50 "$work/caddy.log" >&2
	fi
	exit "$1"
}

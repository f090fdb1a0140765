#!/usr/bin/env bash
# A newcomer's run: a fresh clone of this checkout, README's first
# command exactly as written (Caddyfile.example on localhost:8080, admin
# localhost:2019), then what README says to do and open next, the documented
# CLI commands against that server, `caddy validate` beside it, and a stop.
# The second README command (the tests) is .ci/run's test stage.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
caddy_pid=
cleanup() {
	if [ -n "$caddy_pid" ] && kill -0 "$caddy_pid" 2>/dev/null; then
		curl -fsS -X POST http://localhost:2019/stop >/dev/null 2>&1 || kill -- "-$caddy_pid" 2>/dev/null || true
		wait "$caddy_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "newcomer: $*" >&2
	echo "--- caddy's output:" >&2
	tail -n 40 "$tmp/caddy.log" >&2 || true
	exit 1
}

git clone -q "$src" "$tmp/hearth"
cd "$tmp/hearth"

# README, first command (in its own process group, so a failed run can be
# stopped with everything go run started).
set -m
go run -tags nobadger,nomysql,nopgx ./cmd/caddy run --config Caddyfile.example >"$tmp/caddy.log" 2>&1 &
caddy_pid=$!
set +m
for _ in $(seq 1 600); do
	curl -fsS http://localhost:8080/ >/dev/null 2>&1 && break
	kill -0 "$caddy_pid" 2>/dev/null || fail "caddy exited"
	sleep 1
done
curl -fsS http://localhost:8080/ | grep 'href="/auth/sign_in"' >/dev/null || fail "http://localhost:8080/ does not show the landing page"
grep -q '"hearth started"' "$tmp/caddy.log" || fail "no start-up line"

# README: add a member from a second terminal (the command prompts for the
# password twice without echo: `script` gives it a terminal).
printf 'correct horse battery\ncorrect horse battery\n' |
	script -qec "go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth member add alice" /dev/null >"$tmp/add.out" ||
	fail "member add alice: $(cat "$tmp/add.out")"
# docs/operations.md: the same with --password-stdin, and the list.
echo 'a long password' | go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth member add bob --password-stdin
go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth member list | grep alice >/dev/null || fail "member list has no alice"

# README: what to open next.
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
[ "$(code http://localhost:8080/auth/sign_in)" = 200 ] || fail "sign-in page"
[ "$(code http://localhost:8080/settings)" = 303 ] || fail "settings (signed out) should send to sign-in"
[ "$(code http://localhost:8080/directory.json)" = 200 ] || fail "directory document"
# Without a token: an authentication error (Inboxt's UNAUTHORIZED, or
# UNAUTHENTICATED) and no data.
got=$(curl -s -X POST -H 'Content-Type: application/json' -d '{"query":"{labels{id}}"}' http://localhost:8080/api/graphql)
case "$got" in
*'"labels":['*) fail "GraphQL without a token answered data: $got" ;;
*UNAUTHORIZED* | *UNAUTHENTICATED*) ;;
*) fail "GraphQL without a token: $got" ;;
esac
# Sign in as alice with the password given at the prompt.
jar="$tmp/cookies"
curl -fsS -c "$jar" -b "$jar" -o /dev/null http://localhost:8080/auth/sign_in
[ "$(code -c "$jar" -b "$jar" -H 'Origin: http://localhost:8080' \
	--data-urlencode username=alice --data-urlencode 'password=correct horse battery' \
	http://localhost:8080/auth/sign_in)" = 303 ] || fail "alice cannot sign in"
[ "$(code -b "$jar" http://localhost:8080/settings)" = 200 ] || fail "settings after sign-in"

# docs/operations.md and docs/graphql.md: an API token, used.
token=$(go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth token create alice --name Obsidian --expires 30d)
curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
	-d '{"query":"{labels{id}}"}' http://localhost:8080/api/graphql | grep -F '"data":{"labels":[]}' >/dev/null ||
	fail "GraphQL with the API token"

# docs/operations.md: a backup of the running server.
go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth backup --output hearth.backup
[ -s hearth.backup ] || fail "empty backup"

# caddy validate while the server with the same config runs.
go run -tags nobadger,nomysql,nopgx ./cmd/caddy validate --config Caddyfile.example || fail "validate beside the running server"

# xcaddy.md: the local development build.
go build -tags nobadger,nomysql,nopgx -o caddy ./cmd/caddy
./caddy list-modules | grep '^http.handlers.hearth_oauth' >/dev/null || fail "the built caddy lacks hearth_oauth"

curl -fsS -X POST http://localhost:2019/stop >/dev/null
wait "$caddy_pid" || fail "caddy did not stop cleanly"
caddy_pid=
echo "newcomer: ok"

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

# Every address answers: the other loopback names of the site, another host
# name (a page and a log line naming the site address to add), a path
# nothing answers (the site's 404 page; JSON under /api/), the favicon.
for base in http://127.0.0.1:8080 'http://[::1]:8080'; do
	curl -fsS "$base/" | grep 'href="/auth/sign_in"' >/dev/null || fail "$base/ does not show the landing page"
done
other=$(curl -sS -H 'Host: mybox.example:8080' -w '\n%{http_code}' http://127.0.0.1:8080/)
case "$other" in
*'add http://mybox.example:8080 to the site&#39;s addresses'*404) ;;
*) fail "another host name: $other" ;;
esac
grep -q '"add_site_address":"http://mybox.example:8080"' "$tmp/caddy.log" || fail "no log line naming the site address to add"
[ "$(curl -s -o "$tmp/page" -w '%{http_code}' http://localhost:8080/settingz)" = 404 ] && grep -q '<title>Page not found' "$tmp/page" ||
	fail "/settingz is not the 404 page"
[ "$(curl -s -w '%{http_code}' http://localhost:8080/api/nothing)" = '{"error":"Record not found"}404' ] || fail "/api/nothing is not a JSON 404"
[ "$(curl -s -o /dev/null -w '%{http_code} %{content_type}' http://localhost:8080/favicon.ico)" = '200 image/x-icon' ] || fail "no favicon"

# README: add a member from a second terminal (the command prompts for the
# password twice without echo: `script` gives it a terminal).
printf 'correct horse battery\ncorrect horse battery\n' |
	script -qec "go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth member add alice" /dev/null >"$tmp/add.out" ||
	fail "member add alice: $(cat "$tmp/add.out")"
# docs/operations.md: the same with --password-stdin, and the list.
echo 'a long password' | go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth member add bob --password-stdin
go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth member list | grep alice >/dev/null || fail "member list has no alice"
# The CLI's check that the name is free left no error in the server's log.
! grep '"level":"error"' "$tmp/caddy.log" || fail "member add logged an error"
[ "$(curl -s -o "$tmp/page" -w '%{http_code}' http://localhost:8080/@alice)" = 200 ] && grep -q '@alice@localhost' "$tmp/page" ||
	fail "/@alice is not alice's page"

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
# The same by the site's other loopback names: the session cookie works
# there too (not Secure over plain http on loopback), each name its own.
for base in http://127.0.0.1:8080 'http://[::1]:8080'; do
	other_jar="$tmp/cookies-other"
	rm -f "$other_jar"
	[ "$(code -c "$other_jar" -b "$other_jar" -H "Origin: $base" \
		--data-urlencode username=alice --data-urlencode 'password=correct horse battery' \
		"$base/auth/sign_in")" = 303 ] || fail "alice cannot sign in at $base"
	[ "$(code -b "$other_jar" "$base/settings")" = 200 ] || fail "settings after sign-in at $base"
done

# docs/operations.md and docs/graphql.md: an API token, used.
token=$(go run -tags nobadger,nomysql,nopgx ./cmd/caddy hearth token create alice --name Obsidian --expires 30d)
curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
	-d '{"query":"{labels{id}}"}' http://localhost:8080/api/graphql | grep -F '"data":{"labels":[]}' >/dev/null ||
	fail "GraphQL with the API token"

# A Pocket export through the Import page (its form, as a browser posts
# it), followed to the end: the page reloads itself (a Refresh to its own
# address) until the entries are written and their pages fetched (here
# they cannot be reached: each fetch fails, and is counted).
printf 'title,url,time_added,cursor,tags,status\nGo 1.22,https://go.dev/blog/go1.22,1700000000,a,go,unread\nBread,https://example.org/bread,1700000001,b,,archive\n' >"$tmp/part_000000.csv"
[ "$(curl -s -o /dev/null -b "$jar" -H 'Origin: http://localhost:8080' -F from=settings -F "file=@$tmp/part_000000.csv" -F type= \
	-w '%{http_code} %{redirect_url}' http://localhost:8080/api/import)" = '303 http://localhost:8080/settings/import' ] || fail "import through the page"
for i in $(seq 1 120); do
	refresh=$(curl -sS -b "$jar" -D - -o "$tmp/import.html" http://localhost:8080/settings/import | tr -d '\r' | sed -n 's/^Refresh: //Ip')
	grep -q '2 of 2 entries done' "$tmp/import.html" && grep -q ': finished' "$tmp/import.html" && [ -z "$refresh" ] && break
	[ -z "$refresh" ] || [ "$refresh" = '5; url=/settings/import' ] || fail "the Import page refreshes to $refresh"
	[ "$i" -lt 120 ] || fail "the import never reached its end on the page: $(grep -o '<p><progress.*</p>' "$tmp/import.html")"
	sleep 1
done

# docs/*-first-requests.md: every shell block of each page, in order, in
# this shell (a block uses the variables of the ones before), as a reader
# copies them; `caddy` is the README's go run, and the password prompt
# gets alice's. A block fails on a failing command or an error answer.
caddy() { go run -tags nobadger,nomysql,nopgx ./cmd/caddy "$@"; }
printf 'correct horse battery\n' >"$tmp/password"
run_page() {
	local page=$1 n=0 b
	mkdir -p "$tmp/blocks"
	rm -f "$tmp"/blocks/*
	awk -v dir="$tmp/blocks" '/^```sh$/ { n++; f = 1; next } /^```$/ { f = 0 } f { print > sprintf("%s/%02d.sh", dir, n) }' "$page"
	[ -n "$(ls "$tmp/blocks")" ] || fail "$page has no shell block"
	for b in "$tmp"/blocks/*.sh; do
		n=$((n + 1))
		trap 'fail "$page, block $n failed: $(cat "$b")"' ERR
		# shellcheck disable=SC1090
		source "$b" >"$b.out" 2>&1 <"$tmp/password"
		trap - ERR
		if grep -Eq '"errors?":|,false,"' "$b.out"; then
			fail "$page, block $n answered an error: $(cat "$b.out")"
		fi
	done
	echo "newcomer: $page: $n blocks ran"
}
run_page docs/graphql-first-requests.md
run_page docs/oauth-first-requests.md
run_page docs/directory-first-requests.md

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

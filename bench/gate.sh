#!/usr/bin/env bash
# Loads hearth_gate in a real Caddy with wrk on loopback: a route behind the
# gate, requested with a valid member session (the session read from the
# store on every request, the member's headers set, the session cookie
# stripped), against the same route without the gate, both answered by
# Caddy's own `respond` with the same body, in the same run.
#
#   bash bench/gate.sh        # from the repository root; needs wrk and curl
#
# Env: DURATION (default 10s), CONNS (default 32), THREADS (default 2),
# ROUNDS (default 3: the two routes alternate, so drifting load on a shared
# machine hits both alike; the ratio is of the medians).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
wrk_settings 32 3
PORT=${PORT:-8095}
ADMIN=${ADMIN:-localhost:2095}
SITE=http://localhost:$PORT

bench_start
{ caddy_global "$ADMIN" "$PORT" "storage_dir $work/data"; cat <<CADDY; } >"$work/Caddyfile"
http://localhost:$PORT {
	handle /open {
		respond "hello from upstream"
	}
	handle /gated {
		hearth_gate
		respond "hello from upstream"
	}
	hearth_oauth
}
CADDY
start_caddy "$SITE/open"

# A member signed in through the real sign-in page.
sign_in_bench
session=$(awk '$6 == "hearth_session" {print $7}' "$jar")
[ -n "$session" ] || { echo "bench: no session after signing in" >&2; exit 1; }
# The gate lets the session through, and only it.
[ "$(curl -fs -H "Cookie: hearth_session=$session" "$SITE/gated")" = "hello from upstream" ] || { echo "bench: the gate refuses the session" >&2; exit 1; }
[ "$(curl -s -o /dev/null -w '%{http_code}' "$SITE/gated")" = 401 ] || { echo "bench: the gate lets a request without a session through" >&2; exit 1; }

median() { tr ' ' '\n' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

open_all= gated_all=
for _ in $(seq "$ROUNDS"); do
	open_all+="$(wrk_load "$SITE/open" | rps) "
	gated_all+="$(wrk_load -H "Cookie: hearth_session=$session" "$SITE/gated" | rps) "
done
open=$(median <<<"${open_all% }")
gated=$(median <<<"${gated_all% }")

cat <<REPORT
bench/gate.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS rounds, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end
respond, no gate (Caddy)          ${open_all% } req/s   median $open
respond behind hearth_gate        ${gated_all% } req/s   median $gated   $(pct "$gated" "$open") of the route without the gate   (target >= 85 %)
REPORT

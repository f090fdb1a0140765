// Package cluster is the two-node test (docs/several-nodes.md): two Caddy processes built from this
// tree serve one site from one PostgreSQL database, and a client talks to
// each directly (no balancer). It needs PostgreSQL ≥ 15 (Debian's
// postgresql; the test runs initdb into a temp dir) and fails without it,
// unless HEARTH_TEST_POSTGRES=skip says locally that it may skip.
//
// The test file has the build tag cluster, so `go test ./...` leaves it out
// (it builds cmd/caddy and takes a minute or two); run it with
//
//	go test -tags nobadger,nomysql,nopgx,cluster -count=1 ./interop/cluster/
//
// (.ci/run stage cluster). Ports: PostgreSQL 127.0.0.1:15438, node A
// 127.0.0.1:18581 (admin 127.0.0.1:18591), node B 127.0.0.1:18582 (admin
// 127.0.0.1:18592); in the test process a khatru relay on 18583 and a
// NIP-05 HTTPS server on 18584; node C (a restore into a fresh database)
// 127.0.0.1:18585 (admin 127.0.0.1:18586).
package cluster

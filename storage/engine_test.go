package storage

import (
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/internal/enginesuite"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

// The tests of this package run on Badger, and with
// HEARTH_TEST_ENGINE=postgres on PostgreSQL (a server from Debian's
// postgresql started by pgtest on 127.0.0.1:15434): every store a test opens
// gets its own table prefix (enginesuite). Tests of what only Badger has
// (its files, its backup stream's internals, the disk-full reserve, offline
// restore into a directory) call badgerOnly. The domain packages under
// storage/ run the same way (storagetest.Main).
const testPostgresPort = 15434

var testPostgres *pgtest.Server

func TestMain(m *testing.M) {
	// stopClusterServer: cluster_test.go's server, when a test started it.
	enginesuite.Main(m, testPostgresPort, &testPostgres, stopClusterServer)
}

// badgerOnly skips a test of what only the Badger engine has when the
// tests run on PostgreSQL.
func badgerOnly(t testing.TB) {
	t.Helper()
	if enginesuite.OnPostgres() {
		t.Skip("Badger only: HEARTH_TEST_ENGINE=postgres")
	}
}

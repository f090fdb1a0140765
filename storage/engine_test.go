package storage

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

// The tests of this package run on Badger, and with
// HEARTH_TEST_ENGINE=postgres on PostgreSQL (a server from Debian's
// postgresql started by pgtest on 127.0.0.1:15434): every store a test opens
// gets its own table prefix, the same one each time it opens the same
// directory, so reopening a store finds its records. Tests of what only
// Badger has (its files, its backup stream's internals, the disk-full
// reserve, offline restore into a directory) call badgerOnly.
const testPostgresPort = 15434

var testPostgres *pgtest.Server

func TestMain(m *testing.M) {
	if os.Getenv("HEARTH_TEST_ENGINE") != "postgres" {
		os.Exit(m.Run())
	}
	var (
		mu       sync.Mutex
		prefixes = map[string]string{}
	)
	testEngineHook = func(dir string, opts Options) Options {
		if testPostgres == nil {
			return opts // pgtest.Main failed: it exits
		}
		mu.Lock()
		defer mu.Unlock()
		p, ok := prefixes[dir]
		if !ok {
			p = fmt.Sprintf("s%d", len(prefixes)+1)
			prefixes[dir] = p
		}
		opts.Postgres = &PostgresOptions{DSN: testPostgres.DSN("postgres"), Prefix: p}
		return opts
	}
	pgtest.Main(m, testPostgresPort, &testPostgres)
}

// badgerOnly skips a test of what only the Badger engine has when the
// tests run on PostgreSQL.
func badgerOnly(t testing.TB) {
	t.Helper()
	if testEngineHook != nil {
		t.Skip("Badger only: HEARTH_TEST_ENGINE=postgres")
	}
}

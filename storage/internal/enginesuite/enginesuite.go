// Package enginesuite runs a package's store tests on both engines: on
// Badger, and with HEARTH_TEST_ENGINE=postgres on PostgreSQL (a server from
// Debian's postgresql started by pgtest), through the testengine hook. The
// TestMain of storage and, through storagetest.Main, of every domain
// package under storage/ call Main, each with a port of its own so the
// packages' tests may run at once.
package enginesuite

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/internal/testengine"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

// Main runs m. With HEARTH_TEST_ENGINE=postgres it starts a test server on
// port (stored in *srv when srv is not nil) and every store the tests
// prepare gets its own table prefix there, the same one each time it opens
// the same directory, so reopening a store finds its records. after, when
// not nil, runs once the tests are done (on either engine).
func Main(m *testing.M, port int, srv **pgtest.Server, after func()) {
	if os.Getenv("HEARTH_TEST_ENGINE") != "postgres" {
		code := m.Run()
		if after != nil {
			after()
		}
		os.Exit(code)
	}
	s, err := pgtest.Start(port)
	if err != nil {
		if !(errors.Is(err, pgtest.ErrMissing) && pgtest.Skip()) {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "pgtest: skipping PostgreSQL tests:", err)
	}
	if srv != nil {
		*srv = s
	}
	var (
		mu       sync.Mutex
		prefixes = map[string]string{}
	)
	testengine.Postgres = func(dir string) (dsn, prefix string, ok bool) {
		if s == nil {
			return "", "", false // no server (HEARTH_TEST_POSTGRES=skip): Badger
		}
		mu.Lock()
		defer mu.Unlock()
		p, ok := prefixes[dir]
		if !ok {
			p = fmt.Sprintf("s%d", len(prefixes)+1)
			prefixes[dir] = p
		}
		return s.DSN("postgres"), p, true
	}
	code := m.Run()
	if after != nil {
		after()
	}
	if s != nil {
		s.Stop()
	}
	os.Exit(code)
}

// OnPostgres reports whether the tests run on PostgreSQL.
func OnPostgres() bool { return testengine.Postgres != nil }

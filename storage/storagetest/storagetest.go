// Package storagetest opens stores for tests: the tests of the domain
// packages under storage/ (on Badger, or on PostgreSQL with
// HEARTH_TEST_ENGINE=postgres: Main), and the tests of handlers that need
// several nodes of one site (two stores on one PostgreSQL database:
// Postgres.TwoNodes).
package storagetest

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/internal/enginesuite"
	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

// Main is the TestMain of a domain package under storage/: it runs the
// tests on Badger, and with HEARTH_TEST_ENGINE=postgres on a test
// PostgreSQL server on port (each package its own, so packages may run at
// once), every store Open gives in its own tables.
// The servers NewPostgres returned are stopped once the tests are done.
func Main(m *testing.M, port int) { enginesuite.Main(m, port, &engineServer, stopServers) }

// engineServer is the PostgreSQL server Main started (nil on Badger).
var engineServer *pgtest.Server

// EngineServer is the PostgreSQL server the stores Open gives are on
// (Main, HEARTH_TEST_ENGINE=postgres), nil on Badger: a test stops it
// (StopServer) to see the store while its database is away, and starts it
// again (Restart).
func EngineServer() *pgtest.Server { return engineServer }

var servers struct {
	sync.Mutex
	all []*Postgres
}

func stopServers() {
	servers.Lock()
	defer servers.Unlock()
	for _, p := range servers.all {
		p.Stop()
	}
}

// OnPostgres reports whether the tests run on PostgreSQL (Main).
func OnPostgres() bool { return enginesuite.OnPostgres() }

// Open opens a store in a temporary directory (on the engine Main chose),
// closed when the test ends.
func Open(t testing.TB) *storage.Store {
	t.Helper()
	st, err := storage.Open(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// OpenFast opens a store in dir without syncs or garbage collection (a
// test that never crashes the machine), closed when the test ends: on
// Badger, or on the PostgreSQL server Main chose.
func OpenFast(tb testing.TB, dir string) *storage.Store {
	tb.Helper()
	noSync := false
	st, err := storage.Open(dir, storage.Options{SyncWrites: &noSync, GCInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// Postgres is a test package's PostgreSQL server for several nodes of one
// site, started when first needed. A package declares one (with its own
// port) and stops it in its TestMain.
type Postgres struct {
	port int
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// NewPostgres returns the server on port, not started yet; Main stops it
// (a package with a TestMain of its own calls Stop).
func NewPostgres(port int) *Postgres {
	p := &Postgres{port: port}
	servers.Lock()
	servers.all = append(servers.all, p)
	servers.Unlock()
	return p
}

// Stop stops the server if it was started.
func (p *Postgres) Stop() {
	if p.srv != nil {
		p.srv.Stop()
	}
}

// TwoNodes opens two stores on one fresh database: two Caddy processes of
// one site. Without PostgreSQL the test fails (or is skipped where
// HEARTH_TEST_POSTGRES=skip allows it: pgtest.Skip).
func (p *Postgres) TwoNodes(t *testing.T) (a, b *storage.Store) {
	t.Helper()
	return p.TwoNodesPrepared(t, func(*storage.Store) {})
}

// TwoNodesPrepared is TwoNodes with prepare called on each store between
// storage.Prepare and Open (a domain's options of the store).
func (p *Postgres) TwoNodesPrepared(t *testing.T, prepare func(*storage.Store)) (a, b *storage.Store) {
	t.Helper()
	p.once.Do(func() { p.srv, p.err = pgtest.Start(p.port) })
	if p.err != nil {
		if errors.Is(p.err, pgtest.ErrMissing) && pgtest.Skip() {
			t.Skip(p.err)
		}
		t.Fatal(p.err)
	}
	dsn := p.srv.NewDatabase(t)
	open := func() *storage.Store {
		s := storage.Prepare(t.TempDir(), storage.Options{Postgres: &storage.PostgresOptions{DSN: dsn, MaxConns: 4}})
		prepare(s)
		if err := s.Open(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open()
}

// Backup is st's backup (Store.Backup), in memory.
func Backup(t testing.TB, st *storage.Store) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := st.Backup(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Eventually polls cond until it holds (another node's work, a lease
// taken over), failing the test after a generous minute. It never asserts
// how long something took. It is the engines' kvtest.Eventually, which
// the engines' own tests use below this package.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	kvtest.Eventually(t, what, cond)
}

// Loop runs body in n goroutines, each again and again until body returns
// false or stop is called (a race test's readers or sign-ins running while
// the test writes); stop returns once every goroutine has returned.
func Loop(n int, body func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if !body() {
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

package storage

import (
	"errors"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/internal/enginesuite"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

// The PostgreSQL server of the cluster tests (cluster_test.go, package
// storage_test): here, in the package, because TestMain stops it.

// clusterPostgresPort is this task's own server port on the shared machine.
const clusterPostgresPort = 15436

var cluster struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// clusterServer returns a running PostgreSQL server: the package's under
// HEARTH_TEST_ENGINE=postgres, else one started for these tests (stopped by
// TestMain).
func clusterServer(t testing.TB) *pgtest.Server {
	t.Helper()
	if enginesuite.OnPostgres() {
		pgtest.Need(t, testPostgres)
		return testPostgres
	}
	cluster.once.Do(func() { cluster.srv, cluster.err = pgtest.Start(clusterPostgresPort) })
	if cluster.err != nil {
		if errors.Is(cluster.err, pgtest.ErrMissing) && pgtest.Skip() {
			t.Skip("PostgreSQL not installed and HEARTH_TEST_POSTGRES=skip")
		}
		t.Fatal(cluster.err)
	}
	return cluster.srv
}

func stopClusterServer() {
	if cluster.srv != nil {
		cluster.srv.Stop()
	}
}

package library

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The library's tests run on Badger, and with HEARTH_TEST_ENGINE=postgres
// on PostgreSQL (storagetest.Main: a server on 127.0.0.1:testPostgresPort).
const testPostgresPort = 15446

func TestMain(m *testing.M) { storagetest.Main(m, testPostgresPort) }

// badgerOnly skips a test of what only the Badger engine has when the
// tests run on PostgreSQL.
func badgerOnly(t testing.TB) {
	t.Helper()
	if storagetest.OnPostgres() {
		t.Skip("Badger only: HEARTH_TEST_ENGINE=postgres")
	}
}

var lastTestID atomic.Uint64

// testID is an id for records tests write themselves: decimal, unique,
// increasing with time as the store's ids (Tx.NewID).
func testID() string {
	for {
		last := lastTestID.Load()
		id := max(last+1, uint64(time.Now().UnixMilli())<<16)
		if lastTestID.CompareAndSwap(last, id) {
			return strconv.FormatUint(id, 10)
		}
	}
}

// openAlice opens a store (storagetest.Open) with one member, alice.
func openAlice(t *testing.T) (*storage.Store, *members.Member) {
	t.Helper()
	st := storagetest.Open(t)
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	return st, m
}

package library

import (
	"os"
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
	return withAlice(t, storagetest.Open(t))
}

// openBadgerAlice opens the Badger store in dir (openBadger) with one
// member, alice.
func openBadgerAlice(t *testing.T, dir string) (*storage.Store, *members.Member) {
	t.Helper()
	return withAlice(t, openBadger(t, dir))
}

func withAlice(t *testing.T, st *storage.Store) (*storage.Store, *members.Member) {
	t.Helper()
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	return st, m
}

// openBadger opens the Badger store in dir with the default options, for
// the tests that close a store and open it again; the caller closes it.
func openBadger(t testing.TB, dir string) *storage.Store {
	t.Helper()
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// orderedKeyPrefixes are the prefixes of a member's ordered filter keys:
// by type, highlighted, by label.
func orderedKeyPrefixes(memberID string) [][]byte {
	return [][]byte{storage.Key("u", memberID, "gql", "oy", ""), orderedHighlightedPrefix(memberID), storage.Key("u", memberID, "gql", "ol", "")}
}

// scanOrderedKeys calls fn with each ordered filter key of the member's
// and its value, prefix by prefix (fn returning false ends a prefix).
func scanOrderedKeys(tx *storage.Tx, memberID string, fn func(k, v []byte) (bool, error)) error {
	for _, p := range orderedKeyPrefixes(memberID) {
		if err := tx.Scan(p, nil, false, false, fn); err != nil {
			return err
		}
	}
	return nil
}

// openSeededStore opens the store `gqlbench seed` wrote in
// $HEARTH_SEARCH_STORE, and its member, for the measurements run by hand
// (searchstore_test.go); the test is skipped when it names none.
func openSeededStore(t *testing.T) (*storage.Store, *members.Member) {
	t.Helper()
	dir := os.Getenv("HEARTH_SEARCH_STORE")
	if dir == "" {
		t.Skip("HEARTH_SEARCH_STORE names no seeded store")
	}
	st := openBadger(t, dir)
	t.Cleanup(func() { st.Close() })
	m, err := members.Of(st).Member(t.Context(), "bench")
	if err != nil {
		t.Fatal(err)
	}
	return st, m
}

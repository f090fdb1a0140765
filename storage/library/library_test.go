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

// testOptions are the library's options of the tests' stores: the
// defaults, but the indexer indexes at once (tests look at the index right
// after a change: one segment per save, merges), where production lets a
// burst of texts gather.
func testOptions() options {
	o := defaultOptions()
	o.textIndexDelay = 0
	return o
}

// openWith is storage.Open with the library's options o, set between
// Prepare and Open (the store's indexer reads them once it starts).
func openWith(dir string, so storage.Options, o options) (*storage.Store, error) {
	st := storage.Prepare(dir, so)
	setOptions(st, o)
	if err := st.Open(); err != nil {
		return nil, err
	}
	return st, nil
}

// setOptions sets the library's options of st, prepared and not open yet.
func setOptions(st *storage.Store, o options) { Of(st).state().opts = o }

// openTest opens a store in a temporary directory (on the engine
// storagetest.Main chose, as storagetest.Open) with the library's options
// o, closed when the test ends.
func openTest(tb testing.TB, o options) *storage.Store {
	tb.Helper()
	st, err := openWith(tb.TempDir(), storage.Options{}, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// openAlice opens a store (openTest, testOptions) with one member, alice.
func openAlice(t *testing.T) (*storage.Store, *members.Member) {
	t.Helper()
	return withAlice(t, openTest(t, testOptions()))
}

// openBadgerAlice opens the Badger store in dir (openBadger) with one
// member, alice.
func openBadgerAlice(t *testing.T, dir string) (*storage.Store, *members.Member) {
	t.Helper()
	return withAlice(t, openBadger(t, dir))
}

func withAlice(t testing.TB, st *storage.Store) (*storage.Store, *members.Member) {
	t.Helper()
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	return st, m
}

// openBadger opens the Badger store in dir with the default options
// (the library's: testOptions), for the tests that close a store and open
// it again; the caller closes it.
func openBadger(t testing.TB, dir string) *storage.Store {
	t.Helper()
	return openBadgerWith(t, dir, testOptions())
}

// openBadgerWith is openBadger with the library's options o.
func openBadgerWith(t testing.TB, dir string, o options) *storage.Store {
	t.Helper()
	st, err := openWith(dir, storage.Options{}, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// orderedKeyPrefixes are the prefixes of a member's ordered filter keys:
// by type, highlighted (by createdAt and by title), by label.
func orderedKeyPrefixes(memberID string) [][]byte {
	return [][]byte{storage.Key("u", memberID, "gql", "oy", ""), orderedHighlightedPrefix(memberID), highlightedTitlePrefix(memberID), storage.Key("u", memberID, "gql", "ol", "")}
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

// bulk skips, under -short (CI's race stage), a test that writes or walks
// thousands of records for the bounds of batches and costs, or checks
// every offset: the race detector makes each record several times
// dearer and judges interleavings, which the smaller tests show as well;
// the run without -short has every such test.
func bulk(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: thousands of records")
	}
}

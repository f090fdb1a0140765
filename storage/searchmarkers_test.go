package storage_test

import (
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// The library's search index as Badger stores it: what only the engine's
// own reads show (deletion markers), through export_test.go.

// TestSearchWritesNoWideMarkers: indexing and deleting items that are not
// wide leaves no deletion marker under tw/, the range every text search
// scans (a store seeded with 100 k items had 100 k of them until Badger's
// compaction dropped them: 4 ms on every text search).
func TestSearchWritesNoWideMarkers(t *testing.T) {
	if storagetest.OnPostgres() {
		t.Skip("Badger only: HEARTH_TEST_ENGINE=postgres")
	}
	st := storagetest.Open(t)
	lib := library.Of(st)
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 20 {
		it, _, err := lib.SaveItem(t.Context(), m.ID, library.NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "t", Text: "some text"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	waitIndexed(t, lib, m.ID)
	if _, err := lib.SetItemsStatus(t.Context(), m.ID, ids[:5], library.StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := lib.PermanentlyDeleteItems(t.Context(), m.ID, ids[:5]); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, lib, m.ID)
	prefix := storage.Key("u", m.ID, "gql", "tw", "")
	n := 0
	if err := st.BadgerDB().View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.AllVersions, o.Prefix, o.PrefetchValues = true, prefix, false
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d entries (deletion markers included) under tw/, want 0", n)
	}
}

// waitIndexed waits until the search indexer took every item of the member.
func waitIndexed(t testing.TB, lib library.Store, memberID string) {
	t.Helper()
	storagetest.Eventually(t, "the search index is built", func() bool {
		n, err := lib.SearchIndexBacklog(t.Context(), memberID)
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

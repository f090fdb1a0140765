//go:build linux

package library

import (
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// An emptying of a large trash that meets a full disk after the answer
// waits, as the search index does, and deletes the rest once space is
// freed: every item counted in the answer is deleted, once.
func TestEmptyTrashOnAFullDiskWaitsAndFinishes(t *testing.T) {
	badgerOnly(t) // a full disk is Badger's (PostgreSQL's server minds its own)
	const reserve = 16 << 20
	disk := storagetest.NewSmallDisk(t, 64<<20)
	st := disk.Store(reserve, nil)
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	fillTrash(t, st, m.ID, n)
	worker := Of(st).state().Indexer
	worker.Hold() // the request's part only, before the disk fills
	got, err := Of(st).EmptyTrash(t.Context(), m.ID)
	if err != nil || got != n {
		worker.Release()
		t.Fatalf("emptyTrash = %d, %v; want %d", got, err, n)
	}
	// (This store's small memtables make Badger take fewer deletions a
	// transaction: the request deletes fewer than emptyTrashInRequest.)
	atAnswer := trashLeft(t, st, m.ID)
	freeSpace := disk.Fill(reserve / 2)
	worker.Release()
	for deadline := time.Now().Add(time.Minute); !worker.WaitsForStore(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker never met the full disk; %d items left", trashLeft(t, st, m.ID))
		}
	}
	if left := trashLeft(t, st, m.ID); left != atAnswer || left == 0 {
		t.Fatalf("%d items left on the full disk, want %d as at the answer", left, atAnswer)
	}

	freeSpace()
	worker.RetryRefused() // as the first write the store takes again does
	waitEmptied(t, st, m.ID)
	if left := trashLeft(t, st, m.ID); left != 0 {
		t.Fatalf("%d items left once space was freed", left)
	}
	if gone := deletedSince(t, st, m.ID); len(gone) != n {
		t.Fatalf("%d tombstones, want %d", len(gone), n)
	}
}

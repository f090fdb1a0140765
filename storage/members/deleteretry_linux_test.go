package members

import (
	"errors"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// A member's records whose deletion fails after the member record's (the
// store stops taking writes: a full disk on Badger, the database away on
// PostgreSQL) are deleted once the store takes writes again, while the
// process runs. Before, they waited for the next opening of the store: on
// a node that runs for months, the deleted member's items and tokens
// stayed.
func TestDeletedMembersRecordsGoOnceTheStoreTakesWritesAgain(t *testing.T) {
	var (
		store *storage.Store
		il    *storagetest.Interleaver
	)
	var stopWrites, resume func()
	var during []byte // the key whose transaction's commit stops the writes
	if srv := storagetest.EngineServer(); srv != nil {
		store, il = storagetest.OpenInterleaved(t)
		// The first batch of the member's records fails with the
		// database: the server goes while the batch is open (during is
		// the member's record, below).
		down := false
		stopWrites = func() {
			if err := srv.StopServer(); err != nil {
				t.Error(err)
			}
			down = true
		}
		resume = func() {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			down = false
		}
		t.Cleanup(func() {
			if down {
				srv.Restart()
			}
		})
	} else {
		// The member record's transaction is admitted before the disk
		// fills and commits; the first batch of the member's records is
		// refused.
		const reserve = 16 << 20
		disk := storagetest.NewSmallDisk(t, 64<<20)
		store, il = storagetest.OpenInterleavedIn(t, disk.StoreDir(), disk.Options(reserve, nil))
		during = memberNameKey("alice")
		var free func()
		stopWrites = func() { free = disk.Fill(reserve / 2) }
		resume = func() { free() }
	}
	own := aliceWithARecord(t, store)
	if during == nil {
		during = own
	}
	stopped := false
	il.BeforeDeleteCommit(during, func() { stopWrites(); stopped = true })
	if err := Of(store).DeleteMember(t.Context(), "alice"); err != nil {
		t.Fatalf("the deletion: %v, want it acknowledged (the member is gone)", err)
	}
	if !stopped {
		t.Fatal("the deletion never reached the transaction that stops the writes")
	}
	if !storagetest.OnPostgres() {
		// Reads go on while the disk is full: the record is still there.
		if err := store.View(t.Context(), func(tx *storage.Tx) error { _, err := tx.Get(own); return err }); err != nil {
			t.Fatalf("the member's record on the full disk: %v, want it still there (the test needs the deletion to fail)", err)
		}
	}
	resume()
	storagetest.Eventually(t, "the deleted member's records are deleted", func() bool {
		err := store.View(t.Context(), func(tx *storage.Tx) error { _, err := tx.Get(own); return err })
		return errors.Is(err, storage.ErrNotFound)
	})
	if _, err := Of(store).Member(t.Context(), "alice"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the member after the deletion: %v", err)
	}
}

package members

import (
	"errors"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// A member's records go after the member record, in batches: a store that
// stops taking writes in between (a reload, a restore, a full disk) or a
// process stopped there leaves them, unreachable, and the operator's second
// try finds no member. The deletion is recorded with the member record's,
// so the next opening of the store finishes it.
func TestDeletedMembersRecordsGoEvenIfTheStoreStopsMidway(t *testing.T) {
	store, il := storagetest.OpenInterleaved(t)
	m, err := Of(store).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	own := storage.Key("u", m.ID, "test", "record")
	if err := store.Update(t.Context(), func(tx *storage.Tx) error { return tx.Put(own, []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	var closed <-chan struct{}
	il.BeforeDeleteCommit(memberNameKey("alice"), func() { closed = il.CloseDuring(store) })
	err = Of(store).DeleteMember(t.Context(), "alice")
	if closed == nil {
		t.Fatal("the deletion wrote no member record")
	}
	<-closed
	if !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("the deletion cut short: %v", err)
	}
	again, err := storage.Open(il.Dir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := Of(again).Member(t.Context(), "alice"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the member after the deletion: %v", err)
	}
	err = again.View(t.Context(), func(tx *storage.Tx) error { _, err := tx.Get(own); return err })
	if !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the deleted member's record once the store opened again: %v, want gone", err)
	}
}

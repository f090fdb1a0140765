package members

import (
	"context"
	"errors"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// A member's records go after the member record, in batches: a store that
// stops taking writes in between (a reload, a restore, a full disk) or a
// process stopped there leaves them, unreachable, and the operator's second
// try finds no member. The deletion is acknowledged (the member is gone)
// and recorded with the member record's, so the next opening of the store
// finishes it.
func TestDeletedMembersRecordsGoEvenIfTheStoreStopsMidway(t *testing.T) {
	store, il := storagetest.OpenInterleaved(t)
	own := aliceWithARecord(t, store)
	var closed <-chan struct{}
	il.BeforeDeleteCommit(memberNameKey("alice"), func() { closed = il.CloseDuring(store) })
	err := Of(store).DeleteMember(t.Context(), "alice")
	if closed == nil {
		t.Fatal("the deletion wrote no member record")
	}
	<-closed
	if err != nil {
		t.Fatalf("the deletion cut short after the member record's: %v, want it acknowledged (the member is gone)", err)
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

// A client that leaves once the member record is deleted (the browser tab
// closed, its request's context ended) neither cuts the records' deletion
// short nor hears of a failure: the member is gone, and so are its records.
func TestDeleteMemberFinishesWhenTheClientLeaves(t *testing.T) {
	store, il := storagetest.OpenInterleaved(t)
	own := aliceWithARecord(t, store)
	// Cancelled as the first batch of its records commits, after the member
	// record's transaction (a context ended before that commit may end the
	// deletion itself, with nothing deleted, as PostgreSQL's engine does).
	ctx, cancel := context.WithCancel(t.Context())
	il.BeforeDeleteCommit(own, cancel)
	if err := Of(store).DeleteMember(ctx, "alice"); err != nil {
		t.Fatalf("the deletion after the client left: %v, want it acknowledged", err)
	}
	if _, err := Of(store).Member(t.Context(), "alice"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the member after the deletion: %v", err)
	}
	err := store.View(t.Context(), func(tx *storage.Tx) error { _, err := tx.Get(own); return err })
	if !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the deleted member's record with the store still open: %v, want gone", err)
	}
}

// aliceWithARecord makes the member alice and a record of her own, and
// returns its key.
func aliceWithARecord(t *testing.T, store *storage.Store) []byte {
	t.Helper()
	m, err := Of(store).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	own := storage.Key("u", m.ID, "test", "record")
	if err := store.Update(t.Context(), func(tx *storage.Tx) error { return tx.Put(own, []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	return own
}

package members

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// deletionNodes is the PostgreSQL server of this package's tests of two
// nodes of one site.
var deletionNodes = storagetest.NewPostgres(15471)

// A node that stops in the middle of a member's deletion, once the member
// record is gone and before its records are, leaves them with the mark;
// another node of the site, running all along, finishes the deletion
// without being restarted: it takes over the retry's lease (or held it)
// and deletes the records.
func TestDeletedMembersRecordsFinishedByAnotherNode(t *testing.T) {
	a, b := deletionNodes.TwoNodes(t)
	storagetest.Eventually(t, "both nodes listen", func() bool { return a.Live() && b.Live() })
	own := aliceWithARecord(t, a)
	m, err := Of(a).Member(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	// B's retry waits until A is closed, so that the test sees what A
	// left (B may hold the lease from the start).
	retryB := deleterKind.Of(b)
	retryB.Hold()
	release := sync.OnceFunc(retryB.Release)
	t.Cleanup(release)
	// A stops at the first step of the records' deletion: closed, so that
	// the steps after it fail with the closed store.
	stopped := false
	saved := dataCleanups
	dataCleanups = append(slices.Clip(saved), func(_ context.Context, st *storage.Store, _ string) error {
		if st == a && !stopped {
			stopped = true
			return a.Close()
		}
		return nil
	})
	t.Cleanup(func() { dataCleanups = saved })

	if err := Of(a).DeleteMember(t.Context(), "alice"); err != nil {
		t.Fatalf("the deletion on A: %v, want it acknowledged (the member is gone)", err)
	}
	if !stopped {
		t.Fatal("A's deletion never reached its records")
	}
	if _, err := Of(b).Member(t.Context(), "alice"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the member on B after A's deletion: %v, want gone", err)
	}
	has := func(key []byte) bool {
		var found bool
		if err := b.View(t.Context(), func(tx *storage.Tx) error {
			var err error
			found, err = tx.Has(key)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return found
	}
	if !has(own) || !has(memberDeletingKey(m.ID)) {
		t.Fatalf("A stopped midway and left: the record %v, the mark %v; want both (the test needs the deletion cut short)", has(own), has(memberDeletingKey(m.ID)))
	}

	release()
	storagetest.Eventually(t, "B deletes the records A left", func() bool { return !has(own) })
	storagetest.Eventually(t, "B removes the mark once they are gone", func() bool { return !has(memberDeletingKey(m.ID)) })
}

package members

import (
	"fmt"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

// TestCountFollowsCreationsAndDeletions: the count the instance endpoints
// show is the number of members after concurrent sign-ups, a refused
// duplicate and a deletion.
func TestCountFollowsCreationsAndDeletions(t *testing.T) {
	st := openTestStore(t)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			if _, err := st.CreateMember(t.Context(), fmt.Sprintf("user%d", i), "", "correct horse"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := st.CreateMember(t.Context(), "USER1", "", "correct horse"); err == nil {
		t.Fatal("a taken username was accepted")
	}
	if err := st.DeleteMember(t.Context(), "user2"); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Count(t.Context()); err != nil || n != 5 {
		t.Fatalf("count = %d, %v; want 5", n, err)
	}
}

// TestCountCatchesUpOnAStoreWithoutIt: a store written before the counter
// existed (or restored from such a backup) counts its members once, then
// keeps the count.
func TestCountCatchesUpOnAStoreWithoutIt(t *testing.T) {
	st := openTestStore(t)
	for _, name := range []string{"ann", "ben", "cat"} {
		if _, err := st.CreateMember(t.Context(), name, "", "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
	dropCounter := func() {
		t.Helper()
		if err := st.st.Update(t.Context(), func(tx *storage.Tx) error { return tx.Delete(memberCountKey()) }); err != nil {
			t.Fatal(err)
		}
	}
	dropCounter()
	if n, err := st.Count(t.Context()); err != nil || n != 3 {
		t.Fatalf("count = %d, %v; want 3", n, err)
	}
	dropCounter()
	if err := st.DeleteMember(t.Context(), "ben"); err != nil {
		t.Fatal(err)
	}
	dropCounter()
	if _, err := st.CreateMember(t.Context(), "dan", "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateMember(t.Context(), "eve", "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Count(t.Context()); err != nil || n != 4 {
		t.Fatalf("count = %d, %v; want 4", n, err)
	}
}

package library

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func TestPendingFetchesEndWithTheirItemOrMember(t *testing.T) {
	st, m := openSavedTest(t)
	a, err := Of(st).QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/a", Title: "Processing"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Of(st).QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/b", Title: "Processing"}, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Of(st).PendingFetches(t.Context(), 10, false, true)
	if err != nil || len(p) != 2 || p[0].URL != "https://example.com/a" || p[0].ItemID != a.ID || p[1].ItemID != b.ID ||
		p[0].Private || !p[1].Private || p[1].URL != "https://example.com/b" {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	// A server fetches only what was queued under its own policy.
	if p, err := Of(st).PendingFetches(t.Context(), 10, false, false); err != nil || len(p) != 1 || p[0].ItemID != a.ID {
		t.Fatalf("public pending = %+v, %v", p, err)
	}
	if p, err := Of(st).PendingFetches(t.Context(), 10, true, false); err != nil || len(p) != 1 || p[0].ItemID != b.ID {
		t.Fatalf("private pending = %+v, %v", p, err)
	}
	// Deleted for good mid-fetch: the fetch saves nothing.
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{a.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{a.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).FinishFetch(t.Context(), m.ID, a.ID, NewItem{URL: "https://example.com/a", Title: "Fetched", Text: "x"}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("finish after delete: %v", err)
	}
	if _, err := Of(st).SavedItem(t.Context(), m.ID, a.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleted item came back: %v", err)
	}
	// Finished once: a second finish (another process) saves nothing.
	if _, err := Of(st).FinishFetch(t.Context(), m.ID, b.ID, NewItem{URL: "https://example.com/b", Title: "Fetched", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).FinishFetch(t.Context(), m.ID, b.ID, NewItem{URL: "https://example.com/b", Title: "Again", Text: "y"}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second finish: %v", err)
	}
	if it, _ := Of(st).SavedItem(t.Context(), m.ID, b.ID); it.Title != "Fetched" {
		t.Fatalf("title = %q", it.Title)
	}
	if err := Of(st).FailFetch(t.Context(), m.ID, b.ID, "late"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("fail after finish: %v", err)
	}
	// A member deleted with fetches pending takes them along.
	if _, err := Of(st).QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/c"}, false); err != nil {
		t.Fatal(err)
	}
	if err := members.Of(st).DeleteMember(t.Context(), m.Username); err != nil {
		t.Fatal(err)
	}
	if p, err := Of(st).PendingFetches(t.Context(), 10, false, true); err != nil || len(p) != 0 {
		t.Fatalf("pending after member deletion = %+v, %v", p, err)
	}
}

// PendingFetchesFrom reads at most maxRead entries a call and resumes where
// the last call stopped: 10,000 imported links waiting on one host cost a
// caller that skips them maxRead reads a call, and a link of another host
// after them is found within one round.
func TestPendingFetchesFromReadsABoundedStep(t *testing.T) {
	st, m := openSavedTest(t)
	const waiting, budget = 10000, 1000
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		for i := range waiting {
			if err := tx.Put(fetchKey(m.ID, fmt.Sprintf("a%06d", i)), fetchValue(fmt.Sprintf("https://slow.example/%d", i), false, "job1"), 0); err != nil {
				return err
			}
		}
		return tx.Put(fetchKey(m.ID, "b000000"), fetchValue("https://other.example/", false, "job1"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	keep := func(p PendingFetch) bool { return SourceDomain(p.URL) != "slow.example" }
	var cursor []byte
	var found []PendingFetch
	calls := 0
	for {
		out, next, read, err := Of(st).PendingFetchesFrom(t.Context(), cursor, 66, budget, keep)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if read > budget {
			t.Fatalf("call %d read %d entries, budget %d", calls, read, budget)
		}
		found = append(found, out...)
		if cursor = next; cursor == nil {
			break
		}
		if calls > waiting/budget+1 {
			t.Fatalf("no end after %d calls", calls)
		}
	}
	if len(found) != 1 || found[0].ItemID != "b000000" || !found[0].Import {
		t.Fatalf("found %+v", found)
	}
	if calls != waiting/budget+1 {
		t.Fatalf("%d calls for %d entries at %d a call", calls, waiting+1, budget)
	}
	// The next round starts from the first entry again.
	if _, next, read, _ := Of(st).PendingFetchesFrom(t.Context(), nil, 66, budget, keep); read != budget || next == nil {
		t.Fatalf("a new round read %d, next %q", read, next)
	}
}

// A save placed in the archive or trash, at a saved date, has both from the
// save on and keeps them through its fetch, finished or failed; so does a
// place the member moved the item to meanwhile. A save that gives neither
// moves an item saved before back to the inbox at its own date. A saved
// date in the future is refused and saves nothing.
func TestQueuedItemKeepsItsPlaceThroughTheFetch(t *testing.T) {
	st, m := openSavedTest(t)
	lib := Of(st)
	when := time.Date(2020, 1, 2, 3, 4, 5, 678000000, time.UTC)
	place := func(id, status string, created time.Time) {
		t.Helper()
		it, err := lib.SavedItem(t.Context(), m.ID, id)
		if err != nil || it.Status != status || !it.CreatedAt.Equal(created) || (status == StatusDeleted) != (it.DeletedAt != nil) {
			t.Fatalf("item %s: %+v %v, want %s at %s", id, it, err, status, created)
		}
	}
	a, err := lib.QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/a", Title: "Processing", Status: StatusArchived, SavedAt: when}, false)
	if err != nil {
		t.Fatal(err)
	}
	place(a.ID, StatusArchived, when)
	if p, err := lib.PendingFetches(t.Context(), 10, false, true); err != nil || len(p) != 1 || p[0].URL != "https://example.com/a" {
		t.Fatalf("pending = %+v %v", p, err)
	}
	if _, err := lib.FinishFetch(t.Context(), m.ID, a.ID, NewItem{URL: "https://example.com/a", Title: "Fetched", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	place(a.ID, StatusArchived, when)

	// Saved again without a place: the inbox, its date kept; moved to the
	// trash while fetched: the trash.
	if _, err := lib.QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/a", Title: "Processing"}, false); err != nil {
		t.Fatal(err)
	}
	place(a.ID, StatusActive, when)
	if _, err := lib.SetItemsStatus(t.Context(), m.ID, []string{a.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.FinishFetch(t.Context(), m.ID, a.ID, NewItem{URL: "https://example.com/a", Title: "Fetched", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	place(a.ID, StatusDeleted, when)

	// Saved into the trash, its fetch failing: still in the trash.
	b, err := lib.QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/b", Title: "Processing", Status: StatusDeleted, SavedAt: when}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.FailFetch(t.Context(), m.ID, b.ID, "the site answered with HTTP 500"); err != nil {
		t.Fatal(err)
	}
	place(b.ID, StatusDeleted, when)

	// A date past the clock's allowance is refused; within it, now.
	var ie *storage.InvalidError
	if _, err := lib.QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/a", SavedAt: time.Now().Add(MaxSavedAtAhead + time.Hour)}, false); !errors.As(err, &ie) || ie.Field != "savedAt" {
		t.Fatalf("a saved date in the future: %v", err)
	}
	place(a.ID, StatusDeleted, when)
	if _, err := lib.QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/c", SavedAt: time.Now().Add(MaxSavedAtAhead + time.Hour)}, false); !errors.As(err, &ie) {
		t.Fatalf("a new item saved in the future: %v", err)
	}
	// A date earlier than the ordered keys hold is refused too (it would
	// sort by the item's id), the zero time among them.
	for _, early := range []time.Time{time.Date(1500, 6, 1, 0, 0, 0, 0, time.UTC), {}} {
		if _, err := CheckSavedAt(early); !errors.As(err, &ie) || ie.Field != "savedAt" || !strings.Contains(ie.Msg, "1678") {
			t.Fatalf("saved at %s: %v", early, err)
		}
	}
	if _, err := lib.QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/a", SavedAt: time.Date(1500, 6, 1, 0, 0, 0, 0, time.UTC)}, false); !errors.As(err, &ie) || ie.Field != "savedAt" {
		t.Fatalf("a saved date before 1678: %v", err)
	}
	place(a.ID, StatusDeleted, when)
	if p, err := lib.PendingFetches(t.Context(), 10, false, true); err != nil || len(p) != 0 {
		t.Fatalf("pending after the refusals = %+v %v", p, err)
	}
	ahead, err := lib.QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/d", SavedAt: time.Now().Add(time.Minute)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if after := storage.Now(); ahead.CreatedAt.After(after) {
		t.Fatalf("a minute ahead: saved at %s, after %s", ahead.CreatedAt, after)
	}
}

package storage

import (
	"errors"
	"testing"
)

func TestPendingFetchesEndWithTheirItemOrMember(t *testing.T) {
	st, m := openSavedTest(t)
	a, err := st.QueueFetch(m.ID, NewItem{URL: "https://example.com/a", Title: "Processing"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.QueueFetch(m.ID, NewItem{URL: "https://example.com/b", Title: "Processing"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.PendingFetches(10)
	if err != nil || len(p) != 2 || p[0].URL != "https://example.com/a" || p[0].ItemID != a.ID || p[1].ItemID != b.ID {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	// Deleted for good mid-fetch: the fetch saves nothing.
	if _, err := st.SetItemsStatus(m.ID, []string{a.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := st.PermanentlyDeleteItems(m.ID, []string{a.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishFetch(m.ID, a.ID, NewItem{URL: "https://example.com/a", Title: "Fetched", Text: "x"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("finish after delete: %v", err)
	}
	if _, err := st.SavedItem(m.ID, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted item came back: %v", err)
	}
	// Finished once: a second finish (another process) saves nothing.
	if _, err := st.FinishFetch(m.ID, b.ID, NewItem{URL: "https://example.com/b", Title: "Fetched", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishFetch(m.ID, b.ID, NewItem{URL: "https://example.com/b", Title: "Again", Text: "y"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second finish: %v", err)
	}
	if it, _ := st.SavedItem(m.ID, b.ID); it.Title != "Fetched" {
		t.Fatalf("title = %q", it.Title)
	}
	if err := st.FailFetch(m.ID, b.ID, "late"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("fail after finish: %v", err)
	}
	// A member deleted with fetches pending takes them along.
	if _, err := st.QueueFetch(m.ID, NewItem{URL: "https://example.com/c"}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMember(m.Username); err != nil {
		t.Fatal(err)
	}
	if p, err := st.PendingFetches(10); err != nil || len(p) != 0 {
		t.Fatalf("pending after member deletion = %+v, %v", p, err)
	}
}

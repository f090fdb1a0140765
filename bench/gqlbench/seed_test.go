package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// seeded opens the store seed wrote in dir and returns its member's
// items of every status (a page of up to 100) and highlights.
func seeded(t *testing.T, dir string) (items, highlights int) {
	t.Helper()
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := members.Of(st).Member(t.Context(), "bench")
	if err != nil {
		t.Fatalf("the seeded member: %v", err)
	}
	page, err := library.Of(st).SavedItemsPage(t.Context(), m.ID, library.ItemFilter{Status: library.StatusAll}, library.PageRequest{Field: library.SortCreatedAt, Desc: true, First: 100})
	if err != nil {
		t.Fatal(err)
	}
	hl, err := library.Of(st).HighlightsPage(t.Context(), m.ID, library.ItemFilter{}, library.PageRequest{Field: library.SortCreatedAt, Desc: true, First: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Items), len(hl.Highlights)
}

// A seed of no items (a store with only the member, say for an import
// benchmark) returns: there is no search index to wait for.
func TestSeedWithoutItems(t *testing.T) {
	for _, args := range [][]string{
		{"-items", "0", "-highlights", "0"},
		{"-items", "0", "-highlights", "5"},
		{"-corpus", "-items", "0"},
	} {
		dir := filepath.Join(t.TempDir(), "store")
		if err := seed(append([]string{"-dir", dir}, args...)); err != nil {
			t.Fatalf("seed %v: %v", args, err)
		}
		if items, highlights := seeded(t, dir); items != 0 || highlights != 0 {
			t.Errorf("seed %v: %d items and %d highlights, want none", args, items, highlights)
		}
	}
}

// A small seed writes what it was asked and returns once the search index
// holds every item.
func TestSeedItems(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := seed([]string{"-dir", dir, "-items", "7", "-highlights", "2"}); err != nil {
		t.Fatal(err)
	}
	if items, highlights := seeded(t, dir); items != 7 || highlights != 2 {
		t.Errorf("%d items and %d highlights, want 7 and 2", items, highlights)
	}
}

// The search corpus: its items, of every status, and the description of
// the corpus the benchmarks read beside the store.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := seed([]string{"-dir", dir, "-corpus", "-items", "60"}); err != nil {
		t.Fatal(err)
	}
	if items, _ := seeded(t, dir); items != 60 {
		t.Errorf("%d items, want 60", items)
	}
	b, err := os.ReadFile(dir + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var info corpusInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Items != 60 || info.TextBytes == 0 {
		t.Errorf("corpus info %+v, %v", info, err)
	}
}

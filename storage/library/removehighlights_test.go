package library

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// manyHighlights is more highlights than one of Badger's transactions
// (with its default 8 MiB memtable) deletes: an import of a long book's
// Kindle highlights brings as many.
const manyHighlights = 6000

// highlightedItem saves an item with n highlights for m, and a second item
// with one, which stays.
func highlightedItem(t *testing.T, st *storage.Store, m *members.Member, n int) (it, other *SavedItem) {
	t.Helper()
	it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/many", Title: "many", HTML: "<p>x</p>", Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err = Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/other", Title: "other", HTML: "<p>y</p>", Text: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).CreateHighlight(t.Context(), m.ID, other.ID, []HighlightSegment{{XPath: "/", Text: "the other item's quote"}}, ""); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := Of(st).CreateHighlight(t.Context(), m.ID, it.ID, []HighlightSegment{{XPath: "/", Text: fmt.Sprintf("quote number %d of a long item", i)}}, "a note"); err != nil {
			t.Fatal(i, err)
		}
	}
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{it.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	return it, other
}

// wantOnlyOthersHighlights fails unless the item is gone and the member's
// highlights are the other item's one.
func wantOnlyOthersHighlights(t *testing.T, st *storage.Store, m *members.Member, it, other *SavedItem) {
	t.Helper()
	if _, err := Of(st).SavedItem(t.Context(), m.ID, it.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the item after its deletion: %v, want not found", err)
	}
	p, err := Of(st).HighlightsPage(t.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Highlights) != 1 || p.Highlights[0].SavedItemID != other.ID {
		t.Fatalf("%d highlights left, want the other item's one", len(p.Highlights))
	}
	if hs, err := Of(st).ItemHighlights(t.Context(), m.ID, it.ID); err != nil || len(hs) != 0 {
		t.Fatalf("the deleted item's highlights: %d (%v)", len(hs), err)
	}
}

// An item with thousands of highlights in the trash is deleted by its
// emptying, and the member's search goes on meanwhile.
func TestEmptyingTheTrashDeletesAnItemWithThousandsOfHighlights(t *testing.T) {
	bulk(t)
	st, m := openAlice(t)
	it, other := highlightedItem(t, st, m, manyHighlights)
	if n, err := Of(st).EmptyTrash(t.Context(), m.ID); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/next", Title: "next", HTML: "<p>zebra</p>", Text: "zebra"}); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, st, m.ID)
	waitEmptied(t, st, m.ID)
	wantOnlyOthersHighlights(t, st, m, it, other)
}

// PermanentlyDeleteItems deletes an item with thousands of highlights, and
// its highlights with it.
func TestPermanentlyDeletingAnItemWithThousandsOfHighlights(t *testing.T) {
	bulk(t)
	st, m := openAlice(t)
	it, other := highlightedItem(t, st, m, manyHighlights)
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{it.ID, other.ID}); err == nil {
		t.Fatal("an item not in the trash deleted beside it")
	}
	if hs, err := Of(st).ItemHighlights(t.Context(), m.ID, it.ID); err != nil || len(hs) != manyHighlights {
		t.Fatalf("after a refused deletion: %d highlights (%v), want all %d", len(hs), err, manyHighlights)
	}
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{it.ID}); err != nil {
		t.Fatal(err)
	}
	wantOnlyOthersHighlights(t, st, m, it, other)
}

// Deleting an item's highlights before the item, cut short between two of
// its transactions (a kill, a stop), leaves the item in the trash with its
// count of highlights right, and the deletion asked again removes it.
func TestAnItemsHighlightsDeletionCutShortGoesOn(t *testing.T) {
	st, m := openAlice(t)
	it, other := highlightedItem(t, st, m, 3*highlightsPerTx)
	batches := 0
	n, err := Of(st).dropHighlights(t.Context(), m.ID, it.ID, it.TrashGen+1, func() bool { batches++; return batches > 1 })
	if err != nil || n != highlightsPerTx {
		t.Fatalf("cut short after a transaction: %d deleted (%v), want %d", n, err, highlightsPerTx)
	}
	got, err := Of(st).SavedItem(t.Context(), m.ID, it.ID)
	if err != nil || got.Status != StatusDeleted {
		t.Fatalf("the item meanwhile: %+v (%v), want in the trash", got, err)
	}
	if hs, err := Of(st).ItemHighlights(t.Context(), m.ID, it.ID); err != nil || len(hs) != 2*highlightsPerTx || got.HighlightCount != len(hs) {
		t.Fatalf("the item meanwhile counts %d highlights and has %d (%v), want %d", got.HighlightCount, len(hs), err, 2*highlightsPerTx)
	}
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{it.ID}); err != nil {
		t.Fatal(err)
	}
	wantOnlyOthersHighlights(t, st, m, it, other)
}

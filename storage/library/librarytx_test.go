package library

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// An item written while another item's write holds the transaction's
// buffers (itemScratch, left by the transaction's first write) gets
// buffers of its own: neither item's record is built in the other's, and
// each item reads back with its own record, content and index entries.
func TestAnItemWrittenWithinAnotherItemsWriteKeepsItsOwnBuffers(t *testing.T) {
	st, m := openSavedTest(t)
	ctx := t.Context()
	at := storage.Now().Add(-time.Hour)
	outer := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: "Outer item",
		OriginalURL: "https://outer.example/a", CreatedAt: at, UpdatedAt: at}
	inner := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeNewsletter, Status: StatusActive, Title: "Inner",
		OriginalURL: "https://inner.example/b", CreatedAt: at.Add(time.Minute), UpdatedAt: at.Add(time.Minute)}
	first := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: "First",
		OriginalURL: "https://first.example/", CreatedAt: at, UpdatedAt: at}
	err := st.Update(ctx, func(tx *storage.Tx) error {
		// A first write leaves its buffers with the transaction.
		if err := writeItem(tx, itemChange{it: first, url: first.OriginalURL}); err != nil {
			return err
		}
		lt := libraryState.Of(tx)
		sc := takeScratch(lt)
		sc.rec = appendItemRecord(sc.rec[:0], outer) // the outer write has begun
		before := slices.Clone(sc.rec)
		if err := writeItem(tx, itemChange{it: inner, url: inner.OriginalURL, content: &ItemContent{Text: "inner words"}}); err != nil {
			return err
		}
		if !bytes.Equal(sc.rec, before) {
			t.Errorf("the inner write changed the outer write's record buffer")
		}
		if lt.scratch == nil || lt.scratch == sc {
			t.Errorf("the inner write gave back %p, want buffers of its own (the outer's are %p)", lt.scratch, sc)
		}
		err := writeItemWith(tx, sc, itemChange{it: outer, url: outer.OriginalURL, content: &ItemContent{Text: "outer words"}})
		putScratch(lt, sc)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		it   *SavedItem
		text string
	}{{outer, "outer words"}, {inner, "inner words"}, {first, ""}} {
		got, err := Of(st).SavedItem(ctx, m.ID, want.it.ID)
		if err != nil || got.Title != want.it.Title || got.Type != want.it.Type || got.Status != want.it.Status || got.OriginalURL != want.it.OriginalURL {
			t.Errorf("item %q read back as %+v, %v", want.it.Title, got, err)
		}
		c, err := Of(st).ItemContent(ctx, m.ID, want.it.ID)
		if err != nil || c.Text != want.text {
			t.Errorf("content of %q: %+v, %v; want %q", want.it.Title, c, err, want.text)
		}
		if want.text == "" {
			continue
		}
		page, err := Of(st).SavedItemsPage(ctx, m.ID, ItemFilter{Text: want.text}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
		if err != nil || len(page.Items) != 1 || page.Items[0].ID != want.it.ID {
			t.Errorf("search for %q: %+v, %v; want %q alone", want.text, page, err, want.it.Title)
		}
	}
}

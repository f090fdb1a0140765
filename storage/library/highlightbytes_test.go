package library

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

// bytesAreARecount checks that the item's record keeps the bytes of its
// highlights as a count of them all gives (itemHighlightBytes), and
// returns them.
func bytesAreARecount(t *testing.T, st *storage.Store, mid, itemID, after string) int {
	t.Helper()
	var kept, count int
	err := st.View(t.Context(), func(tx *storage.Tx) error {
		var it SavedItem
		if err := getItem(tx, itemKey(mid, itemID), &it); err != nil {
			return err
		}
		kept = it.hlBytes
		var err error
		count, err = itemHighlightBytes(tx, mid, itemID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if kept != count {
		t.Fatalf("after %s the item keeps %d bytes of highlights, a count of them gives %d", after, kept, count)
	}
	return kept
}

// keptBytes is the item's hlBytes as its record holds them.
func keptBytes(t *testing.T, st *storage.Store, mid, itemID string) int {
	t.Helper()
	var it SavedItem
	if err := st.View(t.Context(), func(tx *storage.Tx) error { return getItem(tx, itemKey(mid, itemID), &it) }); err != nil {
		t.Fatal(err)
	}
	return it.hlBytes
}

// An item's record keeps its highlights' bytes through every change of
// them: highlights and notes made, notes changed, highlights deleted,
// imported into a new item and into one the member has (a note joined),
// quotes placed, highlights dropped from an item in the trash.
func TestAnItemKeepsItsHighlightsBytes(t *testing.T) {
	st, m := openAlice(t)
	lib := Of(st)
	item := saveN(t, st, m.ID, 1)[0]
	bytesAreARecount(t, st, m.ID, item.ID, "a save")
	var hs []*Highlight
	for i := range 3 {
		segs := []HighlightSegment{{XPath: "/p[1]", BeforeText: "before ", AfterText: " after", Text: fmt.Sprint("quote ", i)},
			{XPath: "/p[2]", Text: "é and more"}}
		h, err := lib.CreateHighlight(t.Context(), m.ID, item.ID, segs, strings.Repeat("n", i))
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if n := bytesAreARecount(t, st, m.ID, item.ID, "3 highlights"); n == 0 {
		t.Fatal("3 highlights of no bytes")
	}
	if _, err := lib.AddNote(t.Context(), m.ID, item.ID, "a note"); err != nil {
		t.Fatal(err)
	}
	bytesAreARecount(t, st, m.ID, item.ID, "a note")
	if _, err := lib.AddNote(t.Context(), m.ID, item.ID, "more of the note"); err != nil {
		t.Fatal(err)
	}
	bytesAreARecount(t, st, m.ID, item.ID, "text joined to the note")
	if _, err := lib.SetHighlightNote(t.Context(), m.ID, hs[1].ID, "a longer note than it had"); err != nil {
		t.Fatal(err)
	}
	bytesAreARecount(t, st, m.ID, item.ID, "a longer note")
	if _, err := lib.SetHighlightNote(t.Context(), m.ID, hs[1].ID, ""); err != nil {
		t.Fatal(err)
	}
	bytesAreARecount(t, st, m.ID, item.ID, "a note taken off")
	if err := lib.DeleteHighlights(t.Context(), m.ID, []string{hs[0].ID, hs[2].ID}); err != nil {
		t.Fatal(err)
	}
	bytesAreARecount(t, st, m.ID, item.ID, "2 highlights deleted")

	j := importJob(t, st, m.ID)
	book := &ImportItem{URL: "https://example.com/book", Title: "Book", Highlights: []ImportHighlight{
		{Segments: quoteSegs("first")}, {Segments: []HighlightSegment{{XPath: "/", Text: "unplaced"}}}, {Note: "the book's note"}}}
	again := &ImportItem{URL: item.OriginalURL, Highlights: []ImportHighlight{
		{Segments: quoteSegs("imported")}, {Note: "an imported note"}, {Segments: quoteSegs("quote 1")}}}
	got, err := lib.ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{{Pos: 1, Item: book}, {Pos: 2, Item: again}}, nil, 0)
	if err != nil || got.Created != 1 || got.Existing != 1 {
		t.Fatalf("import: %v %+v", err, got)
	}
	bytesAreARecount(t, st, m.ID, item.ID, "an import into the item")
	bookID, err := lib.ImportedItemID(t.Context(), m.ID, book)
	if err != nil {
		t.Fatal(err)
	}
	before := bytesAreARecount(t, st, m.ID, bookID, "an import of a new item")
	n, err := lib.PlaceHighlights(t.Context(), m.ID, bookID, func(quote string) []HighlightSegment {
		return []HighlightSegment{{XPath: "/p[3]", BeforeText: "context ", EndOffset: len(quote), Text: quote}}
	})
	if err != nil || n != 1 {
		t.Fatalf("placed %d, %v; want 1", n, err)
	}
	if after := bytesAreARecount(t, st, m.ID, bookID, "a quote placed"); after <= before {
		t.Fatalf("a quote placed with its context: %d bytes before, %d after", before, after)
	}

	// More highlights than the item's removal deletes, dropped in parts.
	var many []ImportHighlight
	for i := range highlightsPerTx + 20 {
		many = append(many, ImportHighlight{Segments: quoteSegs(fmt.Sprint("passage ", i))})
	}
	big := &ImportItem{URL: "https://example.com/big", Title: "Big", Highlights: many}
	if _, err := lib.ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{{Pos: 3, Item: big}}, nil, 0); err != nil {
		t.Fatal(err)
	}
	bigID, err := lib.ImportedItemID(t.Context(), m.ID, big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.SetItemsStatus(t.Context(), m.ID, []string{bigID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if n, err := lib.dropHighlights(t.Context(), m.ID, bigID, math.MaxUint64, nil); err != nil || n != highlightsPerTx {
		t.Fatalf("dropped %d, %v; want %d", n, err, highlightsPerTx)
	}
	bytesAreARecount(t, st, m.ID, bigID, "highlights dropped in the trash")
}

// An item whose record was written before it kept its highlights' bytes
// (an earlier version's binary record, or a JSON one) has them unknown: a
// deletion and a shorter note leave them so, and the first change that
// needs them counts them once and stores them.
func TestAnOldItemRecordCountsItsHighlightsBytesOnce(t *testing.T) {
	for _, form := range []string{"binary", "JSON"} {
		t.Run(form, func(t *testing.T) {
			st, m := openAlice(t)
			lib := Of(st)
			item := saveN(t, st, m.ID, 1)[0]
			var hs []*Highlight
			for i := range 3 {
				h, err := lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs(fmt.Sprint("quote ", i)), "a note")
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, h)
			}
			err := st.Update(t.Context(), func(tx *storage.Tx) error {
				var it SavedItem
				if err := getItem(tx, itemKey(m.ID, item.ID), &it); err != nil {
					return err
				}
				if form == "JSON" {
					return tx.PutJSON(itemKey(m.ID, item.ID), &it, 0)
				}
				it.hlBytes = unknownHighlightBytes
				rec := appendItemRecord(nil, &it)
				if rec[0] != itemRecordV1 {
					t.Fatalf("the record of an earlier version starts with %#x", rec[0])
				}
				return tx.Put(itemKey(m.ID, item.ID), rec, 0)
			})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := lib.SavedItem(t.Context(), m.ID, item.ID); err != nil || got.HighlightCount != 3 {
				t.Fatalf("the old record: %v %+v", err, got)
			}
			if n := keptBytes(t, st, m.ID, item.ID); n != unknownHighlightBytes {
				t.Fatalf("the old record keeps %d bytes, want them unknown", n)
			}
			if err := lib.DeleteHighlights(t.Context(), m.ID, []string{hs[0].ID}); err != nil {
				t.Fatal(err)
			}
			if _, err := lib.SetHighlightNote(t.Context(), m.ID, hs[1].ID, "a"); err != nil {
				t.Fatal(err)
			}
			if n := keptBytes(t, st, m.ID, item.ID); n != unknownHighlightBytes {
				t.Fatalf("after a deletion and a shorter note the item keeps %d bytes, want them unknown", n)
			}
			if got, err := lib.SavedItem(t.Context(), m.ID, item.ID); err != nil || got.HighlightCount != 2 {
				t.Fatalf("after a deletion: %v %+v", err, got)
			}
			if _, err := lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs("a new one"), ""); err != nil {
				t.Fatal(err)
			}
			bytesAreARecount(t, st, m.ID, item.ID, "a highlight on an old record")
			if err := lib.DeleteHighlights(t.Context(), m.ID, []string{hs[2].ID}); err != nil {
				t.Fatal(err)
			}
			bytesAreARecount(t, st, m.ID, item.ID, "a deletion after")
		})
	}
}

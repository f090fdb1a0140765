package library

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// openLimited opens a store whose items hold count highlights of bytes
// in all, with one member.
func openLimited(t *testing.T, count, bytes int) (*storage.Store, *members.Member) {
	t.Helper()
	o := testOptions()
	o.maxItemHighlights, o.maxItemHighlightBytes = count, bytes
	return withAlice(t, openTest(t, o))
}

func quoteSegs(text string) []HighlightSegment {
	return []HighlightSegment{{XPath: "/p[1]", Text: text}}
}

// itemHighlightsAre checks what a client sees of the item: its count of
// highlights and the highlights it lists.
func itemHighlightsAre(t *testing.T, st *storage.Store, mid, itemID string, want int) *SavedItem {
	t.Helper()
	it, err := Of(st).SavedItem(t.Context(), mid, itemID)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := Of(st).ItemHighlights(t.Context(), mid, itemID)
	if err != nil {
		t.Fatal(err)
	}
	if it.HighlightCount != want || len(hs) != want {
		t.Fatalf("the item counts %d highlights and lists %d, want %d", it.HighlightCount, len(hs), want)
	}
	return it
}

// An item holds maxItemHighlights highlights, its note among them: one
// more is refused with an input error that says the limit, and changes
// nothing (not the item's updatedAt either); the note still takes text
// (no new highlight), and a deleted highlight leaves room for another.
func TestAnItemHoldsAtMostItsLimitOfHighlights(t *testing.T) {
	st, m := openLimited(t, 3, MaxItemHighlightBytes)
	item := saveN(t, st, m.ID, 1)[0]
	lib := Of(st)
	var first *Highlight
	for i := range 2 {
		h, err := lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs(fmt.Sprint("quote ", i)), "")
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = h
		}
	}
	if _, err := lib.AddNote(t.Context(), m.ID, item.ID, "the note"); err != nil {
		t.Fatal(err)
	}
	before := itemHighlightsAre(t, st, m.ID, item.ID, 3)
	_, err := lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs("one too many"), "")
	if !storage.IsInvalid(err) || !strings.Contains(err.Error(), "at most 3 highlights") {
		t.Fatalf("a 4th highlight: %v, want an input error that says the limit", err)
	}
	after := itemHighlightsAre(t, st, m.ID, item.ID, 3)
	if !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("the refused highlight moved the item's updatedAt from %v to %v", before.UpdatedAt, after.UpdatedAt)
	}
	if _, err := lib.AddNote(t.Context(), m.ID, item.ID, "more of the note"); err != nil {
		t.Errorf("text for the item's note, at the limit: %v", err)
	}
	if err := lib.DeleteHighlights(t.Context(), m.ID, []string{first.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs("in its place"), ""); err != nil {
		t.Fatalf("a highlight in a deleted one's place: %v", err)
	}
	itemHighlightsAre(t, st, m.ID, item.ID, 3)
}

// An item's highlights hold maxItemHighlightBytes of texts in all: a
// highlight, a new note, text added to the note, or a longer note on a
// highlight past it is refused, and changes nothing; a shorter note is
// taken.
func TestAnItemsHighlightsHoldAtMostItsBytes(t *testing.T) {
	st, m := openLimited(t, 100, 1000)
	item := saveN(t, st, m.ID, 1)[0]
	lib := Of(st)
	h, err := lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs(strings.Repeat("a", 500)), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs(strings.Repeat("b", 500)), "")
	if !storage.IsInvalid(err) || !strings.Contains(err.Error(), "at most 1000 bytes") {
		t.Fatalf("a highlight past the bytes: %v, want an input error that says the limit", err)
	}
	if _, err := lib.AddNote(t.Context(), m.ID, item.ID, strings.Repeat("c", 600)); !storage.IsInvalid(err) {
		t.Fatalf("a note past the bytes: %v, want an input error", err)
	}
	itemHighlightsAre(t, st, m.ID, item.ID, 1)
	if _, err := lib.AddNote(t.Context(), m.ID, item.ID, strings.Repeat("c", 300)); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.AddNote(t.Context(), m.ID, item.ID, strings.Repeat("d", 300)); !storage.IsInvalid(err) {
		t.Fatalf("text for the note past the bytes: %v, want an input error", err)
	}
	if _, err := lib.SetHighlightNote(t.Context(), m.ID, h.ID, strings.Repeat("e", 250)); !storage.IsInvalid(err) {
		t.Fatalf("a longer note past the bytes: %v, want an input error", err)
	}
	if _, err := lib.SetHighlightNote(t.Context(), m.ID, h.ID, strings.Repeat("e", 150)); err != nil {
		t.Fatalf("a note within the bytes: %v", err)
	}
	hs, err := lib.ItemHighlights(t.Context(), m.ID, item.ID)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, h := range hs {
		total += len(h.Note)
		for _, sg := range h.Segments {
			total += len(sg.XPath) + len(sg.Text)
		}
	}
	if len(hs) != 2 || total > 1000 {
		t.Fatalf("the item holds %d highlights of %d bytes, want 2 of at most 1000", len(hs), total)
	}
}

// An import stops adding highlights to an item at its limits, in a new
// item and in one the member has: the item is imported, not failed, with
// the highlights that fit, and the job lists the entry with how many it
// did not keep and why.
func TestImportsStopAddingHighlightsAtTheLimit(t *testing.T) {
	st, m := openLimited(t, 3, 1<<20)
	var hls []ImportHighlight
	for i := range 5 {
		hls = append(hls, ImportHighlight{Segments: quoteSegs(fmt.Sprint("imported quote ", i))})
	}
	j := importJob(t, st, m.ID)
	got, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{
		{Pos: 1, Ref: "book", Item: &ImportItem{URL: "https://example.com/book", Title: "Book", Highlights: hls}},
		{Pos: 2, Ref: "book again", Item: &ImportItem{URL: "https://example.com/book", Title: "Book", Highlights: hls[3:]}},
	}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Created != 1 || got.Existing != 1 || got.Failed != 0 || got.HighlightsCut != 2 || len(got.Failures) != 2 {
		t.Fatalf("job: %+v", got)
	}
	for i, want := range []string{"2 of its highlights were not imported", "2 of its highlights were not imported"} {
		if f := got.Failures[i]; !strings.Contains(f.Reason, want) || !strings.Contains(f.Reason, "at most 3 highlights") {
			t.Errorf("failure %d: %+v, want %q and the limit", i, f, want)
		}
	}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("items: %v %+v", err, page)
	}
	itemHighlightsAre(t, st, m.ID, page.Items[0].ID, 3)
}

// The bytes bound an import as the count does: a Kindle-like file of
// long highlights keeps those that fit.
func TestImportsStopAddingHighlightsAtTheBytes(t *testing.T) {
	st, m := openLimited(t, 100, 1000)
	var hls []ImportHighlight
	for i := range 4 {
		hls = append(hls, ImportHighlight{Segments: quoteSegs(fmt.Sprint(i, strings.Repeat("x", 300)))})
	}
	j := importJob(t, st, m.ID)
	got, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{
		{Pos: 1, Ref: "book", Item: &ImportItem{URL: "https://example.com/book", Title: "Book", Highlights: hls}},
	}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Created != 1 || got.HighlightsCut != 1 || len(got.Failures) != 1 || !strings.Contains(got.Failures[0].Reason, "1 of its highlights") {
		t.Fatalf("job: %+v", got)
	}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusAll}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("items: %v %+v", err, page)
	}
	itemHighlightsAre(t, st, m.ID, page.Items[0].ID, 3)
}

// Placing a quote kept without a place gives it a path and context: a
// place past the item's bytes is not given, and the quote stays as it
// was; one within them is.
func TestAQuoteIsPlacedOnlyWithinTheItemsBytes(t *testing.T) {
	st, m := openLimited(t, 100, 200)
	in := &ImportItem{URL: "https://example.com/book", Title: "Book",
		Highlights: []ImportHighlight{{Segments: []HighlightSegment{{XPath: "/", Text: "needle"}}}}}
	j := importJob(t, st, m.ID)
	if _, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{{Pos: 1, Item: in}}, nil, 0); err != nil {
		t.Fatal(err)
	}
	id, err := Of(st).ImportedItemID(t.Context(), m.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	placeWith := func(context string) int {
		n, err := Of(st).PlaceHighlights(t.Context(), m.ID, id, func(quote string) []HighlightSegment {
			return []HighlightSegment{{XPath: "/p[1]", BeforeText: context, EndOffset: len(quote), Text: quote}}
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := placeWith(strings.Repeat("x", 300)); n != 0 {
		t.Fatalf("a place past the bytes: %d placed, want 0", n)
	}
	if hs, _ := Of(st).ItemHighlights(t.Context(), m.ID, id); len(hs) != 1 || !Unplaced(hs[0].Segments) {
		t.Fatalf("the quote after a place past the bytes: %+v", hs)
	}
	if n := placeWith("a little context "); n != 1 {
		t.Fatalf("a place within the bytes: %d placed, want 1", n)
	}
}

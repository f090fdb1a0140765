package library

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// The limits on a highlight's segments count characters, as their messages
// say, not bytes: CJK text (3 bytes a character in UTF-8) gets the same
// room as ASCII.
func TestHighlightLimitsCountCharacters(t *testing.T) {
	st, m := openSavedTest(t)
	item := saveN(t, st, m.ID, 1)[0]
	cases := []struct {
		name string
		seg  HighlightSegment
		ok   bool
	}{
		{"4000 × 語 text", HighlightSegment{XPath: "/p", Text: strings.Repeat("語", 4000)}, true},
		{"10000 × 語 text", HighlightSegment{XPath: "/p", Text: strings.Repeat("語", MaxSegmentText)}, true},
		{"10001 × 語 text", HighlightSegment{XPath: "/p", Text: strings.Repeat("語", MaxSegmentText+1)}, false},
		{"1000 × é context", HighlightSegment{XPath: "/p", BeforeText: strings.Repeat("é", MaxSegmentContext), AfterText: strings.Repeat("é", MaxSegmentContext)}, true},
		{"1001 × é before", HighlightSegment{XPath: "/p", BeforeText: strings.Repeat("é", MaxSegmentContext+1)}, false},
		{"2000-character xpath", HighlightSegment{XPath: "/" + strings.Repeat("段", MaxXPathLen-1)}, true},
		{"2001-character xpath", HighlightSegment{XPath: "/" + strings.Repeat("段", MaxXPathLen)}, false},
	}
	for _, c := range cases {
		_, err := Of(st).CreateHighlight(t.Context(), m.ID, item.ID, []HighlightSegment{c.seg}, "")
		if c.ok && err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.ok && !storage.IsInvalid(err) {
			t.Errorf("%s: %v, want an invalid-input error", c.name, err)
		}
	}
}

// Deleting highlights with an id given twice deletes them, as the batch
// mutations on items do, and the item's highlight count drops by one each.
func TestDeleteHighlightsWithARepeatedID(t *testing.T) {
	st, m := openSavedTest(t)
	item := saveN(t, st, m.ID, 1)[0]
	var ids []string
	for i := 0; i < 3; i++ {
		h, err := Of(st).CreateHighlight(t.Context(), m.ID, item.ID, []HighlightSegment{{XPath: "/p", Text: "x"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID)
	}
	if err := Of(st).DeleteHighlights(t.Context(), m.ID, []string{ids[0], ids[1], ids[0]}); err != nil {
		t.Fatalf("delete with a repeated id: %v", err)
	}
	left, err := Of(st).ItemHighlights(t.Context(), m.ID, item.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != ids[2] {
		t.Fatalf("%d highlights left, want only %s", len(left), ids[2])
	}
	got, err := Of(st).SavedItem(t.Context(), m.ID, item.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.HighlightCount != 1 {
		t.Fatalf("highlight count %d, want 1", got.HighlightCount)
	}
	// An unknown id among them still deletes nothing.
	if err := Of(st).DeleteHighlights(t.Context(), m.ID, []string{ids[2], ids[0]}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("delete with an unknown id: %v, want storage.ErrNotFound", err)
	}
	if left, _ := Of(st).ItemHighlights(t.Context(), m.ID, item.ID); len(left) != 1 {
		t.Fatalf("%d highlights left after a refused delete, want 1", len(left))
	}
}

// A highlight shows its item's title as it is now: renaming the item (or
// saving its URL again with a new title) changes the title its highlights
// show and are searched by, and moves their updatedAt for incremental sync,
// also for an item whose highlights are too many for one transaction.
func TestHighlightsFollowTheirItemsTitle(t *testing.T) {
	for _, tc := range []struct {
		name       string
		highlights int
		text       string
	}{
		{"a few highlights", 3, "passage"},
		{"more than one transaction holds", 100, strings.Repeat("long passage ", 700)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, m := openSavedTest(t)
			item := saveN(t, st, m.ID, 1)[0]
			for i := 0; i < tc.highlights; i++ {
				if _, err := Of(st).CreateHighlight(t.Context(), m.ID, item.ID, []HighlightSegment{{XPath: "/p", Text: tc.text}}, ""); err != nil {
					t.Fatal(err)
				}
			}
			before, err := Of(st).ItemHighlights(t.Context(), m.ID, item.ID)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
			title := "Renamed by the reader"
			renamed, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, item.ID, ItemMetadata{Title: &title})
			if err != nil {
				t.Fatal(err)
			}
			after, err := Of(st).ItemHighlights(t.Context(), m.ID, item.ID)
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range after {
				if h.ItemTitle != title {
					t.Fatalf("highlight %d shows title %q, want %q", i, h.ItemTitle, title)
				}
				if !h.UpdatedAt.After(before[i].UpdatedAt) {
					t.Fatalf("highlight %d: updatedAt did not move", i)
				}
			}
			search := func(text string, from *time.Time) int {
				p, err := Of(st).HighlightsPage(t.Context(), m.ID, ItemFilter{Text: text, UpdatedFrom: from}, PageRequest{Field: SortUpdatedAt, Desc: true, First: 100})
				if err != nil {
					t.Fatal(err)
				}
				return len(p.Highlights)
			}
			if n := search("renamed by", nil); n != tc.highlights {
				t.Errorf("search for the new title found %d highlights, want %d", n, tc.highlights)
			}
			if n := search(strings.ToLower(item.Title), nil); n != 0 {
				t.Errorf("search for the old title found %d highlights, want 0", n)
			}
			if n := search("", &renamed.UpdatedAt); n != tc.highlights {
				t.Errorf("updated since the rename: %d highlights, want %d", n, tc.highlights)
			}
			// Saving the URL again with another title does the same.
			if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: item.OriginalURL, Title: "Saved again", Text: "body"}); err != nil {
				t.Fatal(err)
			}
			if n := search("saved again", nil); n != tc.highlights {
				t.Errorf("search for the title saved again found %d highlights, want %d", n, tc.highlights)
			}
		})
	}
}

// A note on an item as a whole is a highlight without segments, one per
// item: counted in the item's highlights, listed with them, each later
// text added to it after a blank line, its note changed in place; an
// empty note, one past the limit, or an item the member has not, is
// refused and changes nothing.
func TestAddNote(t *testing.T) {
	st, m := openSavedTest(t)
	item := saveN(t, st, m.ID, 1)[0]
	n, err := Of(st).AddNote(t.Context(), m.ID, item.ID, "  Bake at dawn.  ")
	if err != nil {
		t.Fatal(err)
	}
	if !n.IsNote() || n.Note != "Bake at dawn." || n.SavedItemID != item.ID {
		t.Fatalf("note = %+v", n)
	}
	again, err := Of(st).AddNote(t.Context(), m.ID, item.ID, "Then rest.")
	if err != nil || again.ID != n.ID || again.Note != "Bake at dawn.\n\nThen rest." {
		t.Fatalf("a second note = %+v, %v", again, err)
	}
	for name, text := range map[string]string{"empty": " \n ", "too long": strings.Repeat("x", MaxNoteLen)} {
		if _, err := Of(st).AddNote(t.Context(), m.ID, item.ID, text); !storage.IsInvalid(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Of(st).AddNote(t.Context(), m.ID, "nope", "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a note on no item: %v", err)
	}
	got, err := Of(st).Highlight(t.Context(), m.ID, n.ID)
	if err != nil || !got.IsNote() || got.Note != "Bake at dawn.\n\nThen rest." {
		t.Fatalf("Highlight = %+v, %v", got, err)
	}
	if _, err := Of(st).SetHighlightNote(t.Context(), m.ID, n.ID, "Bake at noon."); err != nil {
		t.Fatal(err)
	}
	it, err := Of(st).SavedItem(t.Context(), m.ID, item.ID)
	if err != nil || it.HighlightCount != 1 {
		t.Fatalf("item = %+v, %v", it, err)
	}
	if hs, err := Of(st).ItemHighlights(t.Context(), m.ID, item.ID); err != nil || len(hs) != 1 || hs[0].ID != n.ID || hs[0].Note != "Bake at noon." {
		t.Fatalf("ItemHighlights = %+v, %v", hs, err)
	}
}

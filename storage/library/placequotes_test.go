package library

import (
	"testing"
)

// A highlight a client makes with its quote alone is placed by looking for
// its quote only: the item's other quotes still unplaced are not looked
// for again at each new one (a fetch of the item places those), so its
// cost is one quote's whatever the item holds.
func TestPlacingANewHighlightLooksForItsQuoteAlone(t *testing.T) {
	st, m := openAlice(t)
	it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/p", Title: "p", HTML: "<p>first words, then second words</p>", Text: "first words, then second words"})
	if err != nil {
		t.Fatal(err)
	}
	var hs []*Highlight
	for _, q := range []string{"first words", "elsewhere", "second words"} {
		h, err := Of(st).CreateHighlight(t.Context(), m.ID, it.ID, []HighlightSegment{{XPath: "/", Text: q}}, "")
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	var asked []string
	placed, err := Of(st).PlaceHighlight(t.Context(), m.ID, hs[2], func(quote string) []HighlightSegment {
		asked = append(asked, quote)
		return []HighlightSegment{{XPath: "/p[1]", StartOffset: 18, EndOffset: 30, Text: quote}}
	})
	if err != nil || !placed || len(asked) != 1 || asked[0] != "second words" {
		t.Fatalf("placed %v (%v), quotes looked for %q, want the new one alone", placed, err, asked)
	}
	for i, want := range []bool{true, true, false} {
		h, err := Of(st).Highlight(t.Context(), m.ID, hs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if Unplaced(h.Segments) != want {
			t.Errorf("highlight %q unplaced: %v, want %v", hs[i].Segments[0].Text, !want, want)
		}
	}
}

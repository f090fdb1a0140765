package library

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// BenchmarkCreateHighlightOnABook creates (and deletes again) a highlight
// on an item of 2,000 highlights of about 200 bytes, as a Kindle book
// imported from Readwise has: with the item's bytes checked (the default,
// which reads the item's highlights once it has more than a few), and
// unchecked (bytes=unchecked: a limit so high that no highlight is read,
// as before the limit).
func BenchmarkCreateHighlightOnABook(b *testing.B) {
	for _, c := range []struct {
		name  string
		bytes int
	}{{"bytes=checked", MaxItemHighlightBytes}, {"bytes=unchecked", math.MaxInt / 2}} {
		b.Run(c.name, func(b *testing.B) {
			o := testOptions()
			o.maxItemHighlightBytes = c.bytes
			st, m := withAlice(b, openTest(b, o))
			it, _, err := Of(st).SaveItem(b.Context(), m.ID, NewItem{URL: "https://example.com/book", Title: "Book", Text: "body"})
			if err != nil {
				b.Fatal(err)
			}
			var hls []ImportHighlight
			for i := range 2000 {
				hls = append(hls, ImportHighlight{Segments: quoteSegs(fmt.Sprint(i, strings.Repeat(" a passage of the book", 9)))})
			}
			j := importJob(b, st, m.ID)
			for pos := 1; pos <= len(hls)/200; pos++ {
				// 200 a transaction, as a store takes them.
				entry := ImportEntry{Pos: pos, Item: &ImportItem{URL: it.OriginalURL, Highlights: hls[(pos-1)*200 : pos*200]}}
				if j, err := Of(st).ImportItems(b.Context(), m.ID, j.ID, []ImportEntry{entry}, nil, 0); err != nil || j.Failed != 0 {
					b.Fatalf("import: %v %+v", err, j)
				}
			}
			if got, err := Of(st).SavedItem(b.Context(), m.ID, it.ID); err != nil || got.HighlightCount != len(hls) {
				b.Fatalf("the book: %v, %+v", err, got)
			}
			for b.Loop() {
				h, err := Of(st).CreateHighlight(b.Context(), m.ID, it.ID, quoteSegs("a new passage"), "")
				if err != nil {
					b.Fatal(err)
				}
				if err := Of(st).DeleteHighlights(b.Context(), m.ID, []string{h.ID}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

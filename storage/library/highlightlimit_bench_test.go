package library

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

// BenchmarkCreateHighlightOnABook creates (and deletes again) a highlight
// on an item of 10 and of 2,000 highlights of about 200 bytes, as a Kindle
// book imported from Readwise has, the item's limits checked: against the
// bytes its record keeps, so that the 2,001st highlight costs what the
// 11th does. Without fsync: the work of a creation, not the disk's sync.
func BenchmarkCreateHighlightOnABook(b *testing.B) {
	for _, have := range []int{10, 2000} {
		b.Run(fmt.Sprint("have=", have), func(b *testing.B) {
			noSync := false
			st, err := openWith(b.TempDir(), storage.Options{SyncWrites: &noSync}, testOptions())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			st, m := withAlice(b, st)
			it, _, err := Of(st).SaveItem(b.Context(), m.ID, NewItem{URL: "https://example.com/book", Title: "Book", Text: "body"})
			if err != nil {
				b.Fatal(err)
			}
			var hls []ImportHighlight
			for i := range have {
				hls = append(hls, ImportHighlight{Segments: []HighlightSegment{{XPath: "/p[1]", Text: fmt.Sprint(i, strings.Repeat(" a passage of the book", 9))}}})
			}
			j := importJob(b, st, m.ID)
			for pos := 1; (pos-1)*200 < have; pos++ {
				// 200 a transaction, as a store takes them.
				entry := ImportEntry{Pos: pos, Item: &ImportItem{URL: it.OriginalURL, Highlights: hls[(pos-1)*200 : min(pos*200, have)]}}
				if j, err := Of(st).ImportItems(b.Context(), m.ID, j.ID, []ImportEntry{entry}, nil, 0); err != nil || j.Failed != 0 {
					b.Fatalf("import: %v %+v", err, j)
				}
			}
			if got, err := Of(st).SavedItem(b.Context(), m.ID, it.ID); err != nil || got.HighlightCount != have {
				b.Fatalf("the book: %v, %+v", err, got)
			}
			segs := []HighlightSegment{{XPath: "/p[1]", Text: "a new passage"}}
			for b.Loop() {
				h, err := Of(st).CreateHighlight(b.Context(), m.ID, it.ID, segs, "")
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

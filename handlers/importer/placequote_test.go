package importer

import (
	"runtime"
	"strings"
	"testing"
)

// Placing an export's quotes walks the item's content once per quote: an
// entry with a long content and many quotes (a 16 MiB wallabag entry holds
// hundreds of thousands) would cost hours of the runner's CPU. Past
// placeBudget bytes of text looked at per item, the rest of its quotes are
// kept unplaced, at the content's root, as a quote not found is.
func TestQuotePlacementIsBoundedPerItem(t *testing.T) {
	content := "<p>" + strings.Repeat("x", 1<<20) + "</p><p>the quote</p>"
	r := &Runner{opts: RunnerOptions{Sanitize: func(s string) string { return s }, HTMLText: func(string) string { return "text" }}}
	it := &Item{URL: "https://example.com/", HTML: content}
	n := 2 * placeBudget / len(content)
	for range n {
		it.Highlights = append(it.Highlights, Highlight{Quote: "the quote"})
	}
	in := r.item(it)
	if len(in.Highlights) != n {
		t.Fatalf("%d highlights kept, want %d", len(in.Highlights), n)
	}
	if s := in.Highlights[0].Segments[0]; s.XPath != "/p[2]" || s.StartOffset != 0 || s.EndOffset != 9 {
		t.Fatalf("first quote placed at %+v", s)
	}
	last := in.Highlights[n-1].Segments[0]
	if last.XPath != "/" || last.Text != "the quote" {
		t.Fatalf("a quote past the budget was placed at %+v (the walk was not bounded)", last)
	}
	placed := 0
	for _, h := range in.Highlights {
		if h.Segments[0].XPath != "/" {
			placed++
		}
	}
	if placed == 0 || placed > placeBudget/len(content)+1 {
		t.Fatalf("%d of %d quotes placed", placed, n)
	}
}

// An Omnivore highlight's note of many paragraphs is joined once: it was
// grown by one string concatenation a paragraph, quadratic in the file (a
// 16 MiB highlights file of short paragraphs copied terabytes).
// Allocations are counted, not time, and compared between two sizes of
// file (linear: 4x the bytes for 4x the file; the quadratic join was 16x),
// so that allocations which do not grow with the file (regexp machines,
// which the race detector's sync.Pool drops at random) do not count.
func TestOmnivoreNoteOfManyParagraphsIsLinear(t *testing.T) {
	allocated := func(paragraphs int) uint64 {
		md := "> the quote\n\n" + strings.Repeat("note\n\n", paragraphs)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		hs := omnivoreHighlights(md)
		runtime.ReadMemStats(&after)
		if len(hs) != 1 || hs[0].Quote != "the quote" || hs[0].Note != strings.TrimSuffix(strings.Repeat("note\n\n", paragraphs), "\n\n") {
			t.Fatalf("highlights: %d", len(hs))
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := allocated(20_000), allocated(80_000)
	if large > 8*small {
		t.Fatalf("omnivoreHighlights allocated %d bytes for 20,000 paragraphs and %d for 80,000: it grows faster than the file", small, large)
	}
}

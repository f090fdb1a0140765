package importer

import (
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
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

// A quote over several paragraphs (Omnivore's "first\n\nsecond") is no
// element's text: it is placed as one segment per element it covers, with
// offsets in that element's text and the piece as the segment's text, as
// Inboxt's web app records a selection across elements; also where the
// paragraphs have no white space between them.
func TestQuoteOverSeveralParagraphsGetsASegmentEach(t *testing.T) {
	r := &Runner{opts: RunnerOptions{Sanitize: func(s string) string { return s }, HTMLText: func(string) string { return "text" }}}
	for _, tc := range []struct {
		content, quote string
		want           []library.HighlightSegment
	}{{
		content: "<div><p>Bread needs <em>time</em>. Knead it well.</p>\n<p>Then let it rest overnight.</p></div>",
		quote:   "Knead it well.\n\nThen let it rest",
		want: []library.HighlightSegment{{XPath: "/div[1]/p[1]", StartOffset: 18, EndOffset: 32, Text: "Knead it well."},
			{XPath: "/div[1]/p[2]", StartOffset: 0, EndOffset: 16, Text: "Then let it rest"}},
	}, {
		content: "<p>one two</p><p>three <b>four</b> five</p><ul><li>six</li></ul>",
		quote:   "two\n\nthree four five\n\nsix",
		want: []library.HighlightSegment{{XPath: "/p[1]", StartOffset: 4, EndOffset: 7, Text: "two"},
			{XPath: "/p[2]", StartOffset: 0, EndOffset: 6, Text: "three "}, {XPath: "/p[2]/b[1]", StartOffset: 0, EndOffset: 4, Text: "four"},
			{XPath: "/p[2]", StartOffset: 10, EndOffset: 15, Text: " five"}, {XPath: "/ul[1]/li[1]", StartOffset: 0, EndOffset: 3, Text: "six"}},
	}} {
		in := r.item(&Item{URL: "https://example.com/", HTML: tc.content, Highlights: []Highlight{{Quote: tc.quote, Note: "n"}}})
		if got := in.Highlights[0].Segments; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q in %s:\n got %+v\nwant %+v", tc.quote, tc.content, got, tc.want)
		}
	}
	// Not there, or over more elements than a highlight may have segments:
	// kept at the root with its text, as before.
	many := strings.Repeat("<p>word</p>", library.MaxSegments+1)
	for content, quote := range map[string]string{"<p>one</p><p>two</p>": "one\n\nthree", many: strings.TrimSpace(strings.Repeat("word\n\n", library.MaxSegments+1))} {
		in := r.item(&Item{URL: "https://example.com/", HTML: content, Highlights: []Highlight{{Quote: quote}}})
		if s := in.Highlights[0].Segments; len(s) != 1 || s[0].XPath != "/" || s[0].Text != quote {
			t.Errorf("%q: %+v, want it at the root", quote, s)
		}
	}
}

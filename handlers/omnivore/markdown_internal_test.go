package omnivore

import (
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// Omnivore's forms (packages/api/src/utils/parser.ts @ 322ce62,
// highlightTranslators): ==text== with the spaces outside, a link holding a
// highlight as ==[text](href)==, one mark per highlighted stretch of a
// text node.
func TestHighlightedMarkdownAsOmnivoreWritesIt(t *testing.T) {
	hl := func(segs ...library.HighlightSegment) *library.Highlight { return &library.Highlight{Segments: segs} }
	cases := []struct {
		name string
		html string
		hs   []*library.Highlight
		want string
	}{
		{"plain markdown", `<h2>Title</h2><p>Some <strong>bold</strong> and <em>soft</em> text.</p><ul><li>one</li><li>two</li></ul>`, nil,
			"## Title\n\nSome **bold** and _soft_ text.\n\n* one\n* two\n"},
		{"spaces outside the marks", `<p>Feed the starter the night before.</p>`, []*library.Highlight{hl(library.HighlightSegment{Text: " the starter "})},
			"Feed ==the starter== the night before.\n"},
		{"across elements", `<p>Flour and <b>water</b> and salt.</p>`, []*library.Highlight{hl(library.HighlightSegment{Text: "and water and"})},
			"Flour ==and== **==water==** ==and== salt.\n"},
		{"a link holding a highlight", `<p>See <a href="https://x.example/a">the recipe</a> here.</p>`, []*library.Highlight{hl(library.HighlightSegment{Text: "recipe"})},
			"See ==[the recipe](https://x.example/a)== here.\n"},
		{"the context picks the occurrence", `<p>salt here.</p><p>More salt there.</p>`,
			[]*library.Highlight{hl(library.HighlightSegment{Text: "salt", BeforeText: "More ", AfterText: " there"})},
			"salt here.\n\nMore ==salt== there.\n"},
		{"two segments", `<p>First part.</p><p>Second part.</p>`,
			[]*library.Highlight{hl(library.HighlightSegment{Text: "part."}, library.HighlightSegment{Text: "Second"})},
			"First ==part.==\n\n==Second== part.\n"},
		{"text not found leaves the content", `<p>Nothing here.</p>`, []*library.Highlight{hl(library.HighlightSegment{Text: "absent"})},
			"Nothing here.\n"},
	}
	for _, c := range cases {
		if got := htmlToMarkdown(c.html, c.hs); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

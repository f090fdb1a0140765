package omnivore

import (
	"fmt"
	"strings"
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
		if got := htmlToMarkdown(c.html, c.hs, nil, ""); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// An item's highlights are looked for in a bounded stretch of its text
// (markBudget): past it the rest are left unmarked, as a highlight whose
// text is not found, so that a long item with thousands of highlights (an
// import adds up to 5,000 an entry) costs its Markdown a bounded search. Here
// 200 highlights of a 4 MiB text, each found in the whole text, are marked
// as far as the budget reaches, in their order.
func TestHighlightedMarkdownSearchesABoundedStretchOfText(t *testing.T) {
	words := strings.Fields("flour water salt yeast starter crumb crust oven proof knead fold shape bake rest rise")
	var b strings.Builder
	var paras [][]string
	textLen := 0 // of the text the highlights are looked for in: paragraphs and a space after each
	for n := 0; textLen < 4<<20; n++ {
		p := make([]string, 300)
		for i := range p {
			p[i] = fmt.Sprintf("%s%d", words[(n*7+i*3)%len(words)], n*1000+i)
		}
		paras = append(paras, p)
		b.WriteString("<p>" + strings.Join(p, " ") + "</p>\n")
		textLen += len(strings.Join(p, " ")) + 1
	}
	const highlights = 200
	hs := make([]*library.Highlight, highlights)
	for k := range hs {
		p := paras[k*len(paras)/highlights]
		hs[k] = &library.Highlight{Segments: []library.HighlightSegment{{
			BeforeText: strings.Join(p[:5], " ") + " ", Text: strings.Join(p[5:15], " "), AfterText: " " + p[15]}}}
	}
	out := htmlToMarkdown(b.String(), hs, nil, "")
	marked := strings.Count(out, "==") / 2
	// Each is found by one search of the whole text (its context is
	// unique there).
	most := markBudget/(textLen-1) + 1
	if marked == 0 || marked > most {
		t.Fatalf("%d of %d highlights marked in %d bytes of text; want 1 to %d (the budget of %d bytes)", marked, highlights, textLen, most, markBudget)
	}
	for k := range marked {
		if q := "==" + hs[k].Segments[0].Text + "=="; !strings.Contains(out, q) {
			t.Fatalf("highlight %d of the %d marked is not marked: the first ones in order should be", k, marked)
		}
	}
}

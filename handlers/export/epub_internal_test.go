package export

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// A chapter's quotes are looked for in a bounded stretch of its text
// (markBudget): an item of 4 MiB whose first highlight is in its first
// paragraph and 199 others in its last has the first marked, and the others
// (which every paragraph before the last would be searched for) left
// unmarked in the text, yet listed at the chapter's end.
func TestChapterMarksQuotesWithinABoundedSearch(t *testing.T) {
	para := func(n, words int) string {
		w := make([]string, words)
		for i := range w {
			w[i] = fmt.Sprintf("crumb%d", n*100000+i)
		}
		return strings.Join(w, " ")
	}
	const highlights = 200
	var b strings.Builder
	first := para(0, 300)
	b.WriteString("<p>" + first + "</p>\n")
	for n := 1; b.Len() < 4<<20; n++ {
		b.WriteString("<p>" + para(n, 300) + "</p>\n")
	}
	last := strings.Fields(para(99999, 10*highlights))
	b.WriteString("<p>" + strings.Join(last, " ") + "</p>\n")
	hs := []*library.Highlight{{Segments: []library.HighlightSegment{{Text: strings.Join(strings.Fields(first)[10:20], " ")}}}}
	for k := 1; k < highlights; k++ {
		hs = append(hs, &library.Highlight{Segments: []library.HighlightSegment{{Text: strings.Join(last[10*k:10*k+5], " ")}}})
	}
	var out strings.Builder
	it := &library.SavedItem{Title: "Long", OriginalURL: "https://example.com/long"}
	if err := writeChapter(&out, it, &library.ItemContent{HTML: b.String()}, hs, nil); err != nil {
		t.Fatal(err)
	}
	text, listed, ok := strings.Cut(out.String(), "<h2>Highlights</h2>")
	if !ok {
		t.Fatal("the chapter lists no highlights")
	}
	if n := strings.Count(text, "<mark>"); n != 1 || !strings.Contains(text, "<mark>"+HighlightText(hs[0])+"</mark>") {
		t.Fatalf("%d quotes marked in the text; want the first alone", n)
	}
	if n := strings.Count(listed, "<mark>"); n != highlights {
		t.Fatalf("%d highlights listed at the end; want %d", n, highlights)
	}
}

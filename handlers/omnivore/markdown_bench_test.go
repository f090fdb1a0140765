package omnivore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// BenchmarkHighlightedMarkdown writes an item of 4 MiB of HTML (paragraphs
// of 2 KB) with 20 highlights as highlightedMarkdown, as a content download
// of the plugins asks it: what it allocates (B/op) is mostly the text the
// highlights are found in and, for each of its bytes, where it comes from.
func BenchmarkHighlightedMarkdown(b *testing.B) {
	var html strings.Builder
	var paras []string
	for n := 0; html.Len() < 4<<20; n++ {
		w := make([]string, 200)
		for i := range w {
			w[i] = fmt.Sprintf("rye%d", n*1000+i)
		}
		paras = append(paras, strings.Join(w, " "))
		html.WriteString("<p>" + paras[n] + "</p>\n")
	}
	hs := make([]*library.Highlight, 20)
	for k := range hs {
		w := strings.Fields(paras[k*len(paras)/len(hs)])
		hs[k] = &library.Highlight{Segments: []library.HighlightSegment{{
			BeforeText: strings.Join(w[:5], " ") + " ", Text: strings.Join(w[5:25], " "), AfterText: " " + w[25]}}}
	}
	src := html.String()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if out := htmlToMarkdown(src, hs, nil, ""); strings.Count(out, "==") != 2*len(hs) {
			b.Fatalf("%d marks, want %d", strings.Count(out, "==")/2, len(hs))
		}
	}
}

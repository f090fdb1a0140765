package reader_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// The library page (50 items of 2,000) and the reader page of a 5 KB
// article, through HTTP on loopback with a signed-in member. Through
// Caddy against respond: see bench/README.md.
func BenchmarkLibraryPage(b *testing.B) {
	f := newFixture(b)
	for i := range 2000 {
		f.save(fmt.Sprintf("A fairly typical article title number %04d", i), "www.example-news-site.com", 1200, library.NewItem{})
	}
	benchGet(b, f, "/library")
}

func BenchmarkReaderPage(b *testing.B) {
	f := newFixture(b)
	it := f.save("An article of 5 KB", "site.example", 900, library.NewItem{HTML: strings.Repeat("<p>"+strings.Repeat("word ", 100)+"</p>", 10)})
	benchGet(b, f, "/library/item/"+it.ID)
}

// BenchmarkReaderPageOfAnArticle is the reader page of a 5 KB article as
// readability keeps one: in its page's div with an id, a footnote linked by
// id; the reader writes the ids with their prefix.
func BenchmarkReaderPageOfAnArticle(b *testing.B) {
	f := newFixture(b)
	html := `<div id="readability-page-1"><article>` + strings.Repeat("<p>"+strings.Repeat("word ", 100)+`<a href="#fn1">1</a></p>`, 10) +
		`<ol><li id="fn1">A note.</li></ol></article></div>`
	it := f.save("An article of 5 KB", "site.example", 900, library.NewItem{HTML: html})
	benchGet(b, f, "/library/item/"+it.ID)
}

func benchGet(b *testing.B, f *fixture, path string) {
	var size int64
	b.ReportAllocs()
	for b.Loop() {
		resp, err := f.client.Get(f.srv.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("HTTP %d", resp.StatusCode)
		}
		size = n
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// BenchmarkReaderBookAtTheHighlightLimit is the reader page of a
// book of 2,000 paragraphs (about 1.2 MB) holding as many highlights as an
// item may, five a paragraph: the page places every one in the content
// and lists them all beside it.
func BenchmarkReaderBookAtTheHighlightLimit(b *testing.B) {
	f := newFixture(b)
	para := strings.Repeat("word ", 120)
	it := f.save("A book", "site.example", 240000, library.NewItem{HTML: strings.Repeat("<p>"+para+"</p>", 2000)})
	lib := library.Of(f.store)
	for n := range library.MaxItemHighlights {
		at := (n % 5) * 100
		seg := library.HighlightSegment{XPath: fmt.Sprintf("/p[%d]", n/5+1), StartOffset: at, EndOffset: at + 20, Text: para[at : at+20]}
		if _, err := lib.CreateHighlight(b.Context(), f.member.ID, it.ID, []library.HighlightSegment{seg}, ""); err != nil {
			b.Fatal(err)
		}
	}
	benchGet(b, f, "/library/item/"+it.ID)
}

package graphql_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// Export memory: the export zip (saved_items.json and one Markdown file
// an item) of the whole library, and an EPUB of 500 of its items (those
// of one label), from libraries of 10,000 and 100,000 items, each
// downloaded over HTTP with an API token and discarded (an op of epub500
// is 20 books). The peaks
// (samplePeaks) are to stay the same at both sizes: the export streams.
// Figures: bench/README.md.

func BenchmarkExportLibrary10k(b *testing.B) { benchmarkExportLibrary(b, 10000) }

func BenchmarkExportLibrary100k(b *testing.B) { benchmarkExportLibrary(b, 100000) }

// HEARTH_EXPORT_ITEMS=n: a library of any size (skipped without it).
func BenchmarkExportLibrarySized(b *testing.B) {
	n, err := strconv.Atoi(os.Getenv("HEARTH_EXPORT_ITEMS"))
	if err != nil || n < 500 {
		b.Skip("HEARTH_EXPORT_ITEMS is not a count of at least 500 items")
	}
	benchmarkExportLibrary(b, n)
}

func benchmarkExportLibrary(b *testing.B, n int) {
	dir := b.TempDir()
	st, err := storage.Open(dir, storage.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	m, err := members.Of(st).CreateMember(b.Context(), "reader", "", "correct horse battery")
	if err != nil {
		b.Fatal(err)
	}
	fillLibrary(b, st, m.ID, n)
	// Opened again: what filling it left in memory (memtables, compactions
	// under way) is not measured as the export's.
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if st, err = storage.Open(dir, storage.Options{GCInterval: -1}); err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	_, token, err := apitokens.Of(st).Create(b.Context(), m.ID, "bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	api := newAPI(st, options{NoImportFetch: true})
	defer api.Close()
	srv := httptest.NewServer(served(api))
	defer srv.Close()
	get := func(b *testing.B, path, kind string) int64 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		size, err := io.Copy(io.Discard, resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != kind {
			b.Fatalf("GET %s: HTTP %d %s, %v", path, resp.StatusCode, resp.Header.Get("Content-Type"), err)
		}
		return size
	}
	// reps downloads in an op: a book takes tens of milliseconds, and the
	// live heap is sampled every 200.
	run := func(name, path, kind string, items, reps int) {
		b.Run(name, func(b *testing.B) {
			var size int64
			pk := samplePeaks(b)
			b.ResetTimer()
			for range b.N * reps {
				size = get(b, path, kind)
			}
			b.StopTimer()
			pk.report(b)
			b.ReportMetric(float64(items*reps)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
			b.ReportMetric(float64(size)/(1<<20), "MiB")
		})
	}
	run("zip", export.APIPath, "application/zip", n, 1)
	run("epub500", export.EPUBPath+"?label=epub", "application/epub+zip", 500, 20)
}

// fillLibrary gives the member n items of about 2 KB of content, as an
// import writes them (no fetch): every tenth with a highlight and a note,
// the first 500 labelled epub, all labelled one of ten others.
func fillLibrary(b *testing.B, st *storage.Store, memberID string, n int) {
	b.Helper()
	ctx := b.Context()
	lib := library.Of(st)
	job, err := lib.CreateImportJob(ctx, &library.ImportJob{MemberID: memberID, Staged: "bench", Format: "HEARTH"})
	if err != nil {
		b.Fatal(err)
	}
	para := "Sourdough needs patience, warm water and a lively starter that doubles in size overnight. "
	body := "<p>" + strings.Repeat(para, 4) + "</p>"
	var batch []library.ImportEntry
	for i := range n {
		html := fmt.Sprintf("<h1>Article %d</h1>%s<ul><li>flour</li><li>water</li></ul>%s<p><a href=\"https://example.org/\">a <em>link</em></a></p>", i, body, body)
		in := &library.ImportItem{
			URL: fmt.Sprintf("https://site%d.example/a/%d", i%40, i), Title: fmt.Sprintf("Article %d", i),
			Description: "About bread", Author: "A. Baker", CreatedAt: time.Unix(1700000000+int64(i), 0),
			Labels: []string{fmt.Sprintf("batch%d", i%10)}, HTML: html, Text: para,
		}
		if i < 500 {
			in.Labels = append(in.Labels, "epub")
		}
		if i%10 == 0 {
			in.Highlights = []library.ImportHighlight{{
				Segments: []library.HighlightSegment{{XPath: "/p[1]", StartOffset: 0, EndOffset: 9, Text: "Sourdough"}}, Note: "a note",
			}}
		}
		batch = append(batch, library.ImportEntry{Pos: i + 1, Ref: "row", Item: in})
		if len(batch) == 500 || i == n-1 {
			if _, err := lib.ImportItems(ctx, memberID, job.ID, batch, nil, 0); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := lib.UpdateImportJob(ctx, memberID, job.ID, func(j *library.ImportJob) { j.State = library.ImportDone }); err != nil {
		b.Fatal(err)
	}
}

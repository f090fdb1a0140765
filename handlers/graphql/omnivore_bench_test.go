package graphql_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// BenchmarkOmnivore compares Omnivore's operations with Inboxt's entries
// first page in the same run, through the handler: HEARTH_BENCH_ITEMS saved
// items (default 2000; bench/README.md has the figures at 100,000), every
// tenth with a highlight, 100 of them updated after the rest.
//
//	HEARTH_BENCH_ITEMS=100000 go test -tags nobadger,nomysql,nopgx -run '^$' -bench BenchmarkOmnivore -benchtime 200x ./handlers/graphql/
func BenchmarkOmnivore(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("HEARTH_BENCH_ITEMS")); err == nil && v >= 200 {
		n = v
	}
	store, m, token := benchStore(b)
	lib := library.Of(store)
	ids := make([]string, n)
	for i := range n {
		it, _, err := lib.SaveItem(b.Context(), m.ID, library.NewItem{
			URL:   fmt.Sprintf("https://example.com/articles/%d", i),
			Title: fmt.Sprintf("Article number %d about bread", i), Description: "A saved article for the benchmark.",
			WordCount: 300 + i, HTML: "<p>Flour, water, salt and yeast.</p>", Text: "Flour, water, salt and yeast.",
		})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = it.ID
		if i%10 == 0 {
			if _, err := lib.CreateHighlight(b.Context(), m.ID, it.ID, []library.HighlightSegment{{XPath: "/p[1]", EndOffset: 5, Text: "Flour"}}, "a note"); err != nil {
				b.Fatal(err)
			}
		}
	}
	time.Sleep(2 * time.Millisecond)
	since := time.Now().UTC().Truncate(time.Millisecond) // the store's times are in milliseconds
	for i := range 100 {
		if _, err := lib.UpdateReadingProgress(b.Context(), m.ID, ids[i*(n/100)], 50); err != nil {
			b.Fatal(err)
		}
	}
	api := newAPI(store, options{TokenRateLimit: -1, MemberRateLimit: -1})
	defer api.Close()
	serveOn := func(api *testAPI, query string, vars map[string]any) []byte {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		w := benchPost(api, token, body)
		if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
			b.Fatalf("status %d: %.300s", w.Code, w.Body.Bytes())
		}
		return w.Body.Bytes()
	}
	serve := func(query string, vars map[string]any) []byte { return serveOn(api, query, vars) }
	entries := `query Entries($query: GetEntriesInput!) { entries(query: $query) { edges { cursor node { __typename id createdAt ... on SavedItem { title originalUrl wordCount status readingProgress updatedAt labels { id name } highlights { id note segments { text } } } } } pageInfo { hasNextPage endCursor } } }`
	search := func(after int) map[string]any {
		return map[string]any{"first": 15, "after": strconv.Itoa(after), "query": " sort:saved-asc ", "includeContent": false, "format": "highlightedMarkdown"}
	}
	b.Run("entries-first-page-15", func(b *testing.B) {
		for b.Loop() {
			serve(entries, map[string]any{"query": map[string]any{"first": 15}})
		}
	})
	b.Run("search-first-page-15", func(b *testing.B) {
		for b.Loop() {
			serve(omnivoreSearch, search(0))
		}
	})
	// The first page of 15 of 100 changes, as the Logseq plugin asks, and
	// all 100 in one page.
	for _, first := range []int{15, 100} {
		b.Run(fmt.Sprintf("updatesSince-100-changes-first-%d", first), func(b *testing.B) {
			for b.Loop() {
				out := serve(omnivoreUpdates, map[string]any{"first": first, "since": since.Format(time.RFC3339Nano)})
				if c := bytes.Count(out, []byte(`"itemID"`)); c != first {
					b.Fatalf("%d changes: %.2000s", c, out)
				}
			}
		})
	}
	// A first sync near its end: each page resumes where the previous one
	// ended, as the plugins page (after += 15).
	b.Run("search-sequential-page-at-the-end", func(b *testing.B) {
		start := n - 15*(b.N+1)
		if start < 0 {
			start = 0
		}
		serve(omnivoreSearch, search(start))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			serve(omnivoreSearch, search(start+15*(i+1)))
		}
	})
	// Deep offsets on another node: a server over the same store that
	// served none of the pages before them (each offset is one it has not
	// seen the end of: no remembered cursor), so the offset comes from the
	// store's fences. The first such page builds the fences.
	other := newAPI(store, options{TokenRateLimit: -1, MemberRateLimit: -1})
	defer other.Close()
	serveOn(other, omnivoreSearch, search(n/2+7))
	b.Run("search-page-at-the-end-other-node", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			offset := n - 15 - i%(n/2)
			out := serveOn(other, omnivoreSearch, search(offset))
			if c := bytes.Count(out, []byte(`"readingProgressPercent"`)); c != 15 {
				b.Fatalf("%d items at offset %d: %.300s", c, offset, out)
			}
		}
	})
}

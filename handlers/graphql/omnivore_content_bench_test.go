package graphql_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// BenchmarkSearchContentPastTheBudget asks Omnivore's search for a page of
// 100 items with their content as Markdown (includeContent, as the
// plugins' search asks it), each item of 512 KiB of HTML, against a content
// budget of 8 MiB (MaxContentBytes): the page meets the budget at its
// 17th item. The fast path then steps aside and gqlgen's executor serves
// the page again, a goroutine an item. It reports besides the largest heap
// seen (peaks, as the imports' benchmarks do).
func BenchmarkSearchContentPastTheBudget(b *testing.B) {
	store, m, token := benchStore(b)
	lib := library.Of(store)
	var para strings.Builder
	for i := 0; para.Len() < 2000; i++ {
		fmt.Fprintf(&para, "Flour %d, water, salt and yeast rest overnight. ", i)
	}
	html := strings.Repeat("<p>"+para.String()+"</p>\n", 512<<10/(para.Len()+8))
	for i := range 100 {
		if _, _, err := lib.SaveItem(b.Context(), m.ID, library.NewItem{URL: fmt.Sprintf("https://example.com/long/%d", i),
			Title: fmt.Sprintf("Long %d", i), HTML: html, Text: para.String()}); err != nil {
			b.Fatal(err)
		}
	}
	api := newAPI(store, options{TokenRateLimit: -1, MemberRateLimit: -1, MaxContentBytes: 8 << 20})
	defer api.Close()
	body, _ := json.Marshal(map[string]any{
		"query": `query S($first: Int, $includeContent: Boolean, $format: String) {
  search(first: $first, includeContent: $includeContent, format: $format) {
    ... on SearchSuccess { edges { node { id content } } }
    ... on SearchError { errorCodes }
  }
}`,
		"variables": map[string]any{"first": 100, "includeContent": true, "format": "markdown"}})
	p := samplePeaks(b)
	b.ResetTimer()
	for range b.N {
		req := httptest.NewRequest(http.MethodPost, graphql.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", token)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		var out struct {
			Errors []gqlError
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != http.StatusOK {
			b.Fatalf("status %d: %.300s", w.Code, w.Body.Bytes())
		}
		if len(out.Errors) == 0 || out.Errors[0].Code() != "CONTENT_LIMIT_EXCEEDED" {
			b.Fatalf("the page's contents were not refused past the budget: %.300s", w.Body.Bytes())
		}
	}
	b.StopTimer()
	p.report(b)
}

package graphql_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// BenchmarkEntriesContentPastTheBudget asks Inboxt's entries for a page of
// 50 articles with their contentHtml and contentText, each article of
// 2 MiB of HTML, against a content budget of 8 MiB (MaxContentBytes): the
// page meets the budget at its 4th item. The fast path then steps
// aside and gqlgen's executor serves the page again, a goroutine an item.
// It reports besides the largest heap seen (peaks, as the imports'
// benchmarks do).
func BenchmarkEntriesContentPastTheBudget(b *testing.B) {
	benchContentPastTheBudget(b, 50, 2<<20, map[string]any{
		"query": `{entries(query:{first:50}){edges{node{...on SavedItem{id article{contentHtml contentText}}}}}}`})
}

// benchContentPastTheBudget saves n items of about size bytes of HTML each
// and times the GraphQL request body, which asks for their contents
// against a budget of 8 MiB, refused with CONTENT_LIMIT_EXCEEDED; it
// reports besides the largest heap seen.
func benchContentPastTheBudget(b *testing.B, n, size int, request map[string]any) {
	store, m, token := benchStore(b)
	lib := library.Of(store)
	var para strings.Builder
	for i := 0; para.Len() < 2000; i++ {
		fmt.Fprintf(&para, "Flour %d, water, salt and yeast rest overnight. ", i)
	}
	html := strings.Repeat("<p>"+para.String()+"</p>\n", size/(para.Len()+8))
	for i := range n {
		if _, _, err := lib.SaveItem(b.Context(), m.ID, library.NewItem{URL: fmt.Sprintf("https://example.com/long/%d", i),
			Title: fmt.Sprintf("Long %d", i), HTML: html, Text: para.String()}); err != nil {
			b.Fatal(err)
		}
	}
	api := newAPI(store, options{TokenRateLimit: -1, MemberRateLimit: -1, MaxContentBytes: 8 << 20})
	defer api.Close()
	body, _ := json.Marshal(request)
	p := samplePeaks(b)
	b.ResetTimer()
	for range b.N {
		w := benchPost(api, token, body)
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

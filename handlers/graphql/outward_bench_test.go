package graphql_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/export"
	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// BenchmarkOutwardContent serves the content that leaves the site for
// other programs, through the handler: the Atom feed's page of 50 items
// Omnivore's search of 50 with their content (includeContent) as HTML
// and as Markdown, and Inboxt's entries of 50 with their contentHtml as
// Inboxt's web app shows them. Half the items are articles of 5 KB without
// images, half newsletters of 5 KB with three pictures, stored, and a
// tracking pixel.
//
//	go test -tags nobadger,nomysql,nopgx -run '^$' -bench BenchmarkOutwardContent -count 10 ./handlers/graphql/
func BenchmarkOutwardContent(b *testing.B) {
	store, m, token := benchStore(b)
	lib := library.Of(store)
	para := "<p>" + strings.Repeat("word ", 100) + "</p>"
	article := strings.Repeat(para, 10)
	letter := strings.Repeat(para, 3) + `<p><img src="https://cdn.example/a.jpg" alt="A" width="600" height="400"></p>` +
		strings.Repeat(para, 3) + `<figure><img src="https://cdn.example/b.png" alt="B"><figcaption>B</figcaption></figure>` +
		strings.Repeat(para, 3) + `<p><img src="https://cdn.example/c.gif" alt="C"></p>` + para +
		`<img src="https://tracker.example/open.gif" width="1" height="1">`
	picture, _, _ := testImages(b)
	for i := range 50 {
		html := article
		if i%2 == 1 {
			html = letter
		}
		it, _, err := lib.SaveItem(b.Context(), m.ID, library.NewItem{URL: fmt.Sprintf("https://example.com/out/%d", i),
			Title: fmt.Sprintf("Item %d", i), HTML: html, Text: "word"})
		if err != nil {
			b.Fatal(err)
		}
		for _, src := range []string{"https://cdn.example/a.jpg", "https://cdn.example/b.png", "https://cdn.example/c.gif"} {
			if i%2 == 1 {
				if _, err := lib.StoreItemImage(b.Context(), m.ID, it.ID, src, picture, libraryservice.DefaultImageQuota); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	secret, err := apitokens.Of(store).RenewFeedSecret(b.Context(), m.ID)
	if err != nil {
		b.Fatal(err)
	}
	api := newAPI(store, options{TokenRateLimit: -1, MemberRateLimit: -1})
	defer api.Close()
	h := served(api)
	serve := func(req *http.Request, want int) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || bytes.Count(w.Body.Bytes(), []byte("word word")) < want {
			b.Fatalf("status %d: %.300s", w.Code, w.Body.Bytes())
		}
	}
	b.Run("atom-50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serve(httptest.NewRequest(http.MethodGet, export.FeedPath+secret+"/atom", nil), 50)
		}
	})
	entries, _ := json.Marshal(map[string]any{"query": `{entries(query:{first:50}){edges{node{...on SavedItem{id article{contentHtml}}}}}}`})
	b.Run("entries-content-50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, graphql.Path, bytes.NewReader(entries))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			serve(req, 50)
		}
	})
	for _, format := range []string{"html", "markdown"} {
		body, _ := json.Marshal(map[string]any{"query": omnivoreSearch,
			"variables": map[string]any{"first": 50, "query": "in:all", "includeContent": true, "format": format}})
		b.Run("search-content-50-"+format, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, graphql.Path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", token)
				serve(req, 50)
			}
		})
	}
}

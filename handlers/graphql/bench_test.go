package graphql_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// benchEntriesBody is bench/entries.lua's request: the first page of 50.
const benchEntriesBody = `{"query":"query Entries($query: GetEntriesInput!) { entries(query: $query) { edges { cursor node { __typename id createdAt ... on SavedItem { title originalUrl wordCount status readingProgress updatedAt labels { id name } } } } pageInfo { hasNextPage endCursor } } }","variables":{"query":{"first":50}}}`

// BenchmarkEntriesFirstPage serves one entries page of 50 through the
// handler, as bench/graphql.sh does through Caddy: 2000 saved items, every
// third one with a label.
func BenchmarkEntriesFirstPage(b *testing.B) { benchmarkEntriesFirstPage(b, false) }

// BenchmarkEntriesFirstPageGqlgen is BenchmarkEntriesFirstPage without the
// fast path: gqlgen's executor writes every field.
func BenchmarkEntriesFirstPageGqlgen(b *testing.B) { benchmarkEntriesFirstPage(b, true) }

// benchStore opens a store for a benchmark (no sync, no garbage
// collection; closed when the benchmark ends) with the member "bench", and
// returns an API token of theirs.
func benchStore(b *testing.B) (*storage.Store, *members.Member, string) {
	b.Helper()
	store := graphql.StoreForTest(b, b.TempDir())
	m, token := graphql.MemberForTest(b, store, "bench")
	return store, m, token
}

func benchmarkEntriesFirstPage(b *testing.B, gqlgenOnly bool) {
	store, m, token := benchStore(b)
	l, err := library.Of(store).CreateLabel(b.Context(), m.ID, "bread", "#ff8800")
	if err != nil {
		b.Fatal(err)
	}
	for n := 0; n < 2000; n++ {
		in := library.NewItem{
			URL:         fmt.Sprintf("https://example.com/articles/%d", n),
			Title:       fmt.Sprintf("Article number %d about bread", n),
			Description: "A saved article for the benchmark.",
			WordCount:   300 + n,
			HTML:        "<p>Flour, water, salt and yeast.</p>",
			Text:        "Flour, water, salt and yeast.",
		}
		if n%3 == 0 {
			in.LabelIDs = []string{l.ID}
		}
		if _, _, err := library.Of(store).SaveItem(b.Context(), m.ID, in); err != nil {
			b.Fatal(err)
		}
	}
	api := newAPI(store, options{TokenRateLimit: -1, MemberRateLimit: -1})
	defer api.Close()
	graphql.SetNoFastPath(api.Server, gqlgenOnly)
	body := []byte(benchEntriesBody)
	serve := func() *httptest.ResponseRecorder { return benchPost(api, "Bearer "+token, body) }
	if w := serve(); w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) ||
		bytes.Count(w.Body.Bytes(), []byte(`"cursor"`)) != 50 {
		b.Fatalf("status %d: %.300s", w.Code, w.Body.Bytes())
	}
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}

// benchPost POSTs the GraphQL request body to api in process, with the
// Authorization header auth, and returns what it answered.
func benchPost(api http.Handler, auth string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, graphql.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	w := httptest.NewRecorder()
	api.ServeHTTP(w, req)
	return w
}

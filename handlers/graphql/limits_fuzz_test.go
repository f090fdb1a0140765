package graphql

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzGraphQLDocument sends arbitrary documents through the handler:
// document limits, gqlgen's parser, validation and execution. No document
// may panic or get a 5xx, the answer is JSON with at most maxErrors+1
// errors, and a document checkDocument accepts is within every limit.
// Seeds: testdata/fuzz/FuzzGraphQLDocument and the shapes below. Run by
// hand: go test -tags nobadger,nomysql,nopgx -run XXX -fuzz FuzzGraphQLDocument -fuzztime 60s ./handlers/graphql/
func FuzzGraphQLDocument(f *testing.F) {
	for _, q := range []string{
		"{ __typename }",
		"{ me { id username } }",
		"query { ...F } fragment F on Query { ...G ...G } fragment G on Query { __typename }",
		"query($q: GetEntriesInput!) { entries(query: $q) { edges { cursor node { __typename ... on SavedItem { id title } } } } }",
		"{ a: __typename b: __typename @skip(if: true) }",
		"{ __schema { types { name fields { name } } } }",
		"{ nope nope nope }",
		"fragment A on Query { ...A } { ...A }",
		"mutation { emptyTrash { __typename } }",
	} {
		f.Add(q)
	}
	s, tok := shapeServer(f)
	lim := defaultDocumentLimits()
	f.Fuzz(func(t *testing.T, q string) {
		c, derr := checkDocument(q, lim)
		if derr == nil && (c.fields > lim.maxFields || c.aliases > lim.maxAliases || c.spreads > lim.maxSpreads ||
			c.directives > lim.maxDirectives || c.sameName > lim.maxSameName || len(q) > lim.maxBytes) {
			t.Fatalf("accepted beyond the limits: %+v", c)
		}
		if strings.TrimSpace(q) == "" {
			return
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, shapeRequest(tok, q))
		if w.Code >= 500 {
			t.Fatalf("HTTP %d: %s", w.Code, w.Body.String())
		}
		var a struct {
			Errors []json.RawMessage `json:"errors"`
		}
		if w.Code != http.StatusOK || w.Body.String() != "null" {
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
				t.Fatalf("HTTP %d, not JSON: %.300s", w.Code, w.Body.String())
			}
		}
		if len(a.Errors) > maxErrors+1 {
			t.Fatalf("%d errors", len(a.Errors))
		}
	})
}

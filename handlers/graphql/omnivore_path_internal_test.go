package graphql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
)

// Anyone may post any query to the Omnivore endpoint: the renamed queries'
// cache keeps a digest of each, and a query's text only when the renaming
// changed it, so 2,000 distinct 30 KiB queries that need no renaming
// (or that do not parse) leave digests alone, and a query Omnivore's
// clients send is renamed the same from the cache. Queries that do need
// renaming keep at most the cache's bytes of renamed text.
func TestRenamedQueriesKeepDigestsOfQueriesNeedingNoRenaming(t *testing.T) {
	rq := newRenamedQueries(DefaultQueryCacheEntries, DefaultQueryCacheBytes)
	pad := strings.Repeat("x", 30<<10)
	for i := range 2000 {
		q := fmt.Sprintf(`{ search(query: "%d %s") { __typename } }`, i, pad)
		if i%2 == 1 {
			q = fmt.Sprintf(`{ search(query: "%d %s") {`, i, pad) // does not parse
		}
		if got := rq.of(q); got != q {
			t.Fatalf("query %d changed: %.60q", i, got)
		}
	}
	if n, bytes := rq.c.held(); n > DefaultQueryCacheEntries || bytes != 0 {
		t.Fatalf("after 2,000 queries of 30 KiB that need no renaming: %d entries holding %d bytes of text", n, bytes)
	}
	const labels = `query GetLabels { labels { ... on LabelsSuccess { labels { id name } } } }`
	want := omnivoreQuery(labels)
	if want == labels {
		t.Fatal("the labels query needs renaming: the check's premise is gone")
	}
	for range 2 {
		if got := rq.of(labels); got != want {
			t.Fatalf("renamed %q, want %q", got, want)
		}
	}
	if v, ok := rq.c.get(labels); !ok || v != want {
		t.Fatalf("the renamed query's entry: %q %v", v, ok)
	}
	for i := range 2000 {
		q := fmt.Sprintf(`{ labels { __typename } search(query: "%d %s") { __typename } }`, i, pad)
		if got := rq.of(q); got == q {
			t.Fatalf("query %d was not renamed", i)
		}
	}
	if n, bytes := rq.c.held(); n > DefaultQueryCacheEntries || bytes > DefaultQueryCacheBytes || bytes < DefaultQueryCacheBytes/2 {
		t.Fatalf("after 2,000 queries of 30 KiB that need renaming: %d entries holding %d bytes, want at most %d", n, bytes, DefaultQueryCacheBytes)
	}
}

// gqlgen keeps each document it parsed and validated. A client without a
// token may post any document that passes the limits, and a document of
// 30 KiB is about 600 KB of memory once parsed: 1,000 of them were about
// 500 MB. The documents kept weigh at most the cache's bytes of query
// text, and a client's repeated query is still answered from the cache.
func TestParsedDocumentsKeptAreBoundedInBytes(t *testing.T) {
	store := StoreForTest(t, t.TempDir())
	lib := libraryservice.Prepare(store, libraryservice.Options{})
	defer lib.Close()
	s := New(store, lib, Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(q string) []byte {
		body, _ := json.Marshal(map[string]string{"query": q})
		resp, err := http.Post(srv.URL+Path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	// A valid document the server parses, validates and then answers
	// without a member: the document is kept all the same.
	pad := strings.Repeat("x", 30<<10)
	const queries = 200
	for i := range queries {
		b := post(fmt.Sprintf(`{ search(query: "%d %s") { __typename } }`, i, pad))
		if !bytes.Contains(b, []byte(`"SearchError"`)) {
			t.Fatalf("query %d: %.300s, want SearchError for a client without a token", i, b)
		}
	}
	if n, held := s.documents.c.held(); held > DefaultQueryCacheBytes || n == queries {
		t.Fatalf("after %d distinct documents of 30 KiB: %d kept, weighing %d bytes of text, want at most %d", queries, n, held, DefaultQueryCacheBytes)
	}
	const me = `query Me { me { id } }`
	post(me)
	if _, ok := s.documents.Get(t.Context(), me); !ok {
		t.Fatal("a small document was not kept")
	}
}

package graphql

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

// Anyone may post any query to the Omnivore endpoint: the renamed queries'
// cache keeps a digest of each, and a query's text only when the renaming
// changed it, so 2,000 distinct 30 KiB queries that need no renaming
// (or that do not parse) leave at most the cache's digests, and a query
// Omnivore's clients send is renamed the same from the cache.
func TestRenamedQueriesKeepDigestsOfQueriesNeedingNoRenaming(t *testing.T) {
	rq := newRenamedQueries(DefaultQueryCacheEntries)
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
	kept := 0
	for _, k := range rq.c.Keys() {
		v, _ := rq.c.Peek(k)
		kept += len(k) + len(v)
	}
	if n := rq.c.Len(); n > DefaultQueryCacheEntries || kept > DefaultQueryCacheEntries*sha256.Size {
		t.Fatalf("after 2,000 queries of 30 KiB that need no renaming: %d entries, %d bytes kept", n, kept)
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
	if v, ok := rq.c.Peek(sha256.Sum256([]byte(labels))); !ok || v != want {
		t.Fatalf("the renamed query's entry: %q %v", v, ok)
	}
}

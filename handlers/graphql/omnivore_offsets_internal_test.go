package graphql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/libraryservice"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// A page by offset that no remembered cursor reaches walks to its offset;
// a request's walks, its aliases' together, look at no more items than its
// allowance (lowered here from the search budget's 100 000), and past it
// the page is refused as a search over its budget is. A sync that reads
// the pages in order, as Omnivore's plugins do (`after += size`), walks
// nothing and reads every item.
func TestOmnivoreOffsetWalksAreBoundedPerRequest(t *testing.T) {
	const items, allowance = 300, 200
	post := offsetServer(t, allowance, func(i int) string { return fmt.Sprintf("https://example.com/%d", i) }, items)
	search := func(alias, query string, after int) string {
		return fmt.Sprintf(`%s: search(after: "%d", first: 15, query: %q) { ... on SearchSuccess { edges { node { id } } pageInfo { hasNextPage } } }`, alias, after, query)
	}
	refused := func(r offsetResult, alias string) bool {
		for _, e := range r.Errors {
			if len(e.Path) == 1 && e.Path[0] == alias && e.Extensions["code"] == "BAD_USER_INPUT" {
				return true
			}
		}
		return false
	}

	// An offset further than the allowance, asked first: refused.
	if r := post("{" + search("far", "sort:updated", 250) + "}"); !refused(r, "far") {
		t.Fatalf("a walk of 250 items with an allowance of 200 was not refused: %+v", r)
	}
	// Within it, one alias walks; two aliases of two queries walk twice
	// as far together, and one of them is refused.
	if r := post("{" + search("near", "sort:title", 150) + "}"); len(r.Errors) != 0 {
		t.Fatalf("a walk of 150 items: %+v", r.Errors)
	}
	if r := post("{" + search("a", "sort:updated-asc", 150) + search("c", "sort:title-asc", 150) + "}"); !refused(r, "a") && !refused(r, "c") {
		t.Fatalf("two walks of 150 items each in one request were not refused: %+v", r)
	}

	// The plugins' sync: pages in order from 0, by the size asked.
	seen := map[string]bool{}
	for after := 0; ; after += 15 {
		r := post("{" + search("page", "sort:updated", after) + "}")
		var page struct {
			Edges []struct {
				Node struct{ ID string }
			}
			PageInfo struct{ HasNextPage bool }
		}
		if len(r.Errors) != 0 || json.Unmarshal(r.Data["page"], &page) != nil {
			t.Fatalf("the sync's page at %d: %+v %s", after, r.Errors, r.Data["page"])
		}
		for _, e := range page.Edges {
			seen[e.Node.ID] = true
		}
		if !page.PageInfo.HasNextPage {
			break
		}
	}
	if len(seen) != items {
		t.Fatalf("the sync read %d items of %d", len(seen), items)
	}
}

// offsetResult is a GraphQL response as the offset tests read it.
type offsetResult struct {
	Data   map[string]json.RawMessage
	Errors []struct {
		Path       []any
		Extensions map[string]any
	}
}

// offsetServer serves GraphQL over HTTP for a member with n items, the
// i-th at url(i), with the walk allowance lowered to allowance, and
// returns a poster of queries as that member.
func offsetServer(t *testing.T, allowance int64, url func(i int) string, n int) func(q string) offsetResult {
	t.Helper()
	store := StoreForTest(t, t.TempDir())
	m, token := MemberForTest(t, store, "alice")
	for i := range n {
		in := library.NewItem{URL: url(i), Title: fmt.Sprintf("t%03d", i), Text: "x", HTML: "<p>x</p>"}
		if _, _, err := library.Of(store).SaveItem(t.Context(), m.ID, in); err != nil {
			t.Fatal(err)
		}
	}
	lib := libraryservice.Prepare(store, libraryservice.Options{TokenRateLimit: -1, MemberRateLimit: -1})
	t.Cleanup(func() { _ = lib.Close() })
	s := New(store, lib, Options{})
	s.offsets.allowance = allowance
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return func(q string) offsetResult {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"query": q})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out offsetResult
		if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP %d: %v %.300s", resp.StatusCode, err, b)
		}
		return out
	}
}

// totalCount of a query beyond a status filter counts its items by walking
// them, within the request's walk allowance like the walks to an offset:
// the items of a query too large to count within it are not counted, and
// its totalCount is null (nullable in Omnivore's schema; its apps then page
// on by hasNextPage) while its pages are served in full.
func TestOmnivoreTotalCountIsBoundedPerRequest(t *testing.T) {
	const allowance = 150
	post := offsetServer(t, allowance, func(i int) string {
		if i%3 == 0 {
			return fmt.Sprintf("https://example.org/%d", i)
		}
		return fmt.Sprintf("https://example.com/%d", i)
	}, 300)
	type page struct {
		Edges    []struct{ Node struct{ ID string } }
		PageInfo struct {
			HasNextPage bool
			TotalCount  *int
		}
	}
	search := func(query string, after int) page {
		t.Helper()
		r := post(fmt.Sprintf(`{ s: search(after: "%d", first: 50, query: %q) { ... on SearchSuccess { edges { node { id } } pageInfo { hasNextPage totalCount } } } }`, after, query))
		var p page
		if len(r.Errors) != 0 || json.Unmarshal(r.Data["s"], &p) != nil {
			t.Fatalf("search %q at %d: %+v %s", query, after, r.Errors, r.Data["s"])
		}
		return p
	}
	// 100 items on example.org: counted, within the allowance, and the
	// count stays for the next pages.
	for _, after := range []int{0, 50} {
		if p := search("site:example.org", after); p.PageInfo.TotalCount == nil || *p.PageInfo.TotalCount != 100 || len(p.Edges) != 50 {
			t.Fatalf("site:example.org at %d: totalCount %v, %d items; want 100 and 50", after, p.PageInfo.TotalCount, len(p.Edges))
		}
	}
	// 200 on example.com: past the allowance.
	seen := 0
	for after := 0; ; after += 50 {
		p := search("site:example.com", after)
		if p.PageInfo.TotalCount != nil {
			t.Fatalf("site:example.com at %d: totalCount %d, counted past the allowance", after, *p.PageInfo.TotalCount)
		}
		seen += len(p.Edges)
		if !p.PageInfo.HasNextPage {
			break
		}
	}
	if seen != 200 {
		t.Fatalf("site:example.com's pages held %d items, want 200", seen)
	}
	// A query by status alone is counted from the kept counts, whatever
	// the allowance.
	if p := search("in:inbox", 0); p.PageInfo.TotalCount == nil || *p.PageInfo.TotalCount != 300 {
		t.Fatalf("in:inbox: totalCount %v, want 300", p.PageInfo.TotalCount)
	}
}

// A totalCount left uncounted because the request had walked to its
// offset first is not remembered as too many: the query's next request,
// which has its whole allowance for the count, counts its items.
func TestOmnivoreTotalCountCutByTheRequestsOwnWalkIsCountedLater(t *testing.T) {
	post := offsetServer(t, 150, func(i int) string {
		if i%3 == 0 {
			return fmt.Sprintf("https://example.org/%d", i)
		}
		return fmt.Sprintf("https://example.com/%d", i)
	}, 300)
	total := func(after int) *int {
		t.Helper()
		r := post(fmt.Sprintf(`{ s: search(after: "%d", first: 10, query: "site:example.org") { ... on SearchSuccess { edges { node { id } } pageInfo { totalCount } } } }`, after))
		var p struct{ PageInfo struct{ TotalCount *int } }
		if len(r.Errors) != 0 || json.Unmarshal(r.Data["s"], &p) != nil {
			t.Fatalf("search at %d: %+v %s", after, r.Errors, r.Data["s"])
		}
		return p.PageInfo.TotalCount
	}
	// Walked 90 items to the offset: 60 left of 150, fewer than the 100
	// items, so this request cannot count them.
	if n := total(90); n != nil {
		t.Fatalf("at 90: totalCount %d, counted past the allowance", *n)
	}
	if n := total(0); n == nil || *n != 100 {
		t.Fatalf("at 0, next: totalCount %v, want 100 (within a request's allowance)", n)
	}
}

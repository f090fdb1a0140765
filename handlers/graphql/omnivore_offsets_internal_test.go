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
	store := StoreForTest(t, t.TempDir())
	m, token := MemberForTest(t, store, "alice")
	const items, allowance = 300, 200
	for i := range items {
		in := library.NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: fmt.Sprintf("t%03d", i), Text: "x", HTML: "<p>x</p>"}
		if _, _, err := library.Of(store).SaveItem(t.Context(), m.ID, in); err != nil {
			t.Fatal(err)
		}
	}
	lib := libraryservice.Prepare(store, libraryservice.Options{TokenRateLimit: -1, MemberRateLimit: -1})
	defer lib.Close()
	s := New(store, lib, Options{})
	s.offsets.allowance = allowance
	srv := httptest.NewServer(s)
	defer srv.Close()

	type result struct {
		Data   map[string]json.RawMessage
		Errors []struct {
			Path       []any
			Extensions map[string]any
		}
	}
	post := func(q string) result {
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
		var out result
		if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP %d: %v %.300s", resp.StatusCode, err, b)
		}
		return out
	}
	search := func(alias, query string, after int) string {
		return fmt.Sprintf(`%s: search(after: "%d", first: 15, query: %q) { ... on SearchSuccess { edges { node { id } } pageInfo { hasNextPage } } }`, alias, after, query)
	}
	refused := func(r result, alias string) bool {
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

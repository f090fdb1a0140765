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
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// me.stats reads the counts the library keeps, not the member's items
// (counted in pages of items read from the store, not in time), however
// many items and aliases there are.
func TestStatsReadNoPageOfItems(t *testing.T) {
	store := StoreForTest(t, t.TempDir())
	m, token := MemberForTest(t, store, "alice")
	const items = 1100 // three pages of the inbox, were they read
	for i := range items {
		in := library.NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "t", WordCount: 100, Text: "x", HTML: "<p>x</p>"}
		if _, _, err := library.Of(store).SaveItem(t.Context(), m.ID, in); err != nil {
			t.Fatal(err)
		}
	}
	lib := libraryservice.Prepare(store, libraryservice.Options{})
	defer lib.Close()
	s := New(store, lib, Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()

	pagesFor := func(aliases int) int64 {
		var q strings.Builder
		q.WriteString("{ me {")
		for i := range aliases {
			fmt.Fprintf(&q, " s%d: stats { unreadCount }", i)
		}
		q.WriteString(" } }")
		body, _ := json.Marshal(map[string]string{"query": q.String()})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		before := s.statsPages.Load()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Data struct {
				Me map[string]struct{ UnreadCount float64 }
			}
			Errors []any
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Errors) > 0 || len(out.Data.Me) != aliases {
			t.Fatalf("%d aliases: %v %.300s", aliases, err, b)
		}
		for name, st := range out.Data.Me {
			if st.UnreadCount != items {
				t.Fatalf("%s = %+v", name, st)
			}
		}
		return s.statsPages.Load() - before
	}
	if one, many := pagesFor(1), pagesFor(200); one != 0 || many != 0 {
		t.Fatalf("one alias read %d pages of items, 200 aliases %d: want none", one, many)
	}
}

package graphql_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// A search the index cannot narrow and that would read more texts than the
// budget answers as Inboxt answers bad input (BAD_USER_INPUT, status 400 in
// extensions, HTTP 200), saying what to do, instead of scanning on; one the
// index narrows answers at once on the same library.
func TestSearchOverBudgetIsBadUserInput(t *testing.T) {
	if testing.Short() {
		t.Skip("saves 10,050 items")
	}
	e := newEnv(t, options{})
	for i := 0; i < 10050; i++ {
		text := "plain words about bread"
		if i == 4321 {
			text += " with a zanzibarite"
		}
		if _, _, err := library.Of(e.store).SaveItem(t.Context(), e.member.ID, library.NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "t", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; ; i++ {
		n, err := library.Of(e.store).SearchIndexBacklog(t.Context(), e.member.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if i > 1200 {
			t.Fatalf("search index backlog %d after two minutes", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Two letters no item holds: no trigram to narrow it, every text read.
	r := e.wantError(e.token, entriesQuery, map[string]any{"query": map[string]any{"first": 10, "q": "qz"}}, 200, "BAD_USER_INPUT")
	if st, _ := r.Errors[0].Extensions["status"].(float64); st != 400 {
		t.Fatalf("extensions.status = %v, want 400", r.Errors[0].Extensions["status"])
	}
	if msg := r.Errors[0].Detail(); !strings.Contains(msg, "add a longer word or a filter") {
		t.Fatalf("message %q does not say what to do", msg)
	}
	// Frequent short text fills its page; a rare word comes from the index.
	if p := e.entries(map[string]any{"first": 10, "q": "br"}); len(p.Entries.Edges) != 10 {
		t.Fatalf("q br: %d entries, want 10", len(p.Entries.Edges))
	}
	p := e.entries(map[string]any{"first": 10, "q": "ZANZIBARITE"})
	if len(p.Entries.Edges) != 1 || p.Entries.PageInfo.HasNextPage {
		t.Fatalf("q ZANZIBARITE: %+v", p.Entries)
	}
}

package graphql_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// BenchmarkStats100000Items asks Inboxt's me.stats (every field of
// UserStats) of a member with 100,000 items, half of them read and a tenth
// archived, imported in batches as an import stores them and indexed.
func BenchmarkStats100000Items(b *testing.B) {
	store, m, token := benchStore(b)
	lib := library.Of(store)
	const items, batch = 100_000, 1000
	read := time.Now().Add(-time.Hour)
	j, err := lib.CreateImportJob(b.Context(), &library.ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: items})
	if err != nil {
		b.Fatal(err)
	}
	for start := 0; start < items; start += batch {
		entries := make([]library.ImportEntry, batch)
		for i := range entries {
			n := start + i
			it := &library.ImportItem{URL: fmt.Sprintf("https://example.com/%d", n), Title: "Item", WordCount: 100 + n%900}
			if n%2 == 0 {
				it.ReadAt = &read
			}
			if n%10 == 0 {
				it.Status = library.StatusArchived
			}
			entries[i] = library.ImportEntry{Pos: n + 1, Item: it}
		}
		if _, err := lib.ImportItems(b.Context(), m.ID, j.ID, entries, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
	// The indexer's work on the import done, so that the figures are
	// the requests' own.
	for {
		n, err := lib.SearchIndexBacklog(b.Context(), m.ID)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	api := newAPI(store, options{TokenRateLimit: -1, MemberRateLimit: -1})
	defer api.Close()
	body, _ := json.Marshal(map[string]any{"query": `query GetUserStats { me { id stats { itemsReadCountAllTime itemsReadCountMonth itemsReadCountWeek estimatedReadingTimeCompleted wordsReadCount unreadCount readCount averageArticleLength averageTimeToFinish } } }`})
	b.ResetTimer()
	for range b.N {
		w := benchPost(api, token, body)
		var out struct {
			Data struct {
				Me struct {
					Stats struct{ UnreadCount, ReadCount float64 }
				}
			}
			Errors []gqlError
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != http.StatusOK || len(out.Errors) > 0 ||
			out.Data.Me.Stats.UnreadCount+out.Data.Me.Stats.ReadCount != items {
			b.Fatalf("status %d: %.300s", w.Code, w.Body.Bytes())
		}
	}
}

package library

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// readingBenchLibrary writes n items for the member (200 a transaction,
// as BenchmarkSavedItemsPage): half of them read, at instants of the last
// year to the millisecond, a tenth archived, 100 to 1,000 words each; it
// returns the ids of the unread items of the inbox, the index caught up.
func readingBenchLibrary(b testing.TB, st *storage.Store, memberID string, n int) []string {
	r := rand.New(rand.NewSource(1))
	now := storage.Now()
	var unread []string
	for i := 0; i < n; i += 200 {
		err := st.Update(b.Context(), func(tx *storage.Tx) error {
			for j := i; j < i+200 && j < n; j++ {
				t := now.Add(time.Duration(j-n) * time.Minute)
				it := &SavedItem{ID: testID(), MemberID: memberID, Type: TypeArticle, Status: StatusActive,
					Title: fmt.Sprintf("t%d", j), CreatedAt: t, UpdatedAt: t, WordCount: 100 + r.Intn(900)}
				if j%10 == 0 {
					it.Status = StatusArchived
				}
				if j%2 == 0 {
					at := now.Add(-time.Duration(r.Int63n(int64(365 * 24 * time.Hour)))).Truncate(time.Millisecond)
					it.ReadAt = &at
				} else if it.Status == StatusActive {
					unread = append(unread, it.ID)
				}
				if err := writeItem(tx, itemChange{it: it}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	waitIndexed(b, st, memberID)
	return unread
}

// BenchmarkReadAndArchive times marking an item read and archiving it
// (SetItemsRead, SetItemsStatus) in a library of 10,000 and 100,000
// items (readingBenchLibrary): each operation one call on one unread
// item of the inbox, every other one undoing the one before (marked
// unread, moved back to the inbox), so that each one changes the item's
// reading counts. cpu-ns/op counts the process's CPU (the indexer's and
// Badger's with the calls').
func BenchmarkReadAndArchive(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		st, m := openSavedTest(b)
		unread := readingBenchLibrary(b, st, m.ID, n)
		lib := Of(st)
		for _, c := range []struct {
			name string
			op   func(id string, do bool) error
		}{
			{"read", func(id string, do bool) error {
				_, err := lib.SetItemsRead(b.Context(), m.ID, []string{id}, do)
				return err
			}},
			{"archive", func(id string, do bool) error {
				status := StatusActive
				if do {
					status = StatusArchived
				}
				_, err := lib.SetItemsStatus(b.Context(), m.ID, []string{id}, status)
				return err
			}},
		} {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				cpu0 := cpuNanos()
				i := 0
				for b.Loop() {
					if err := c.op(unread[(i/2)%len(unread)], i%2 == 0); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

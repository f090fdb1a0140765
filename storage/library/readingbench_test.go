package library

import (
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
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

// TestReadingCountsCatchUpOfALargeStore times, by hand, the indexer's
// catch-up of the reading counts (recountReading) of a store as version
// 8 left it, of HEARTH_RECOUNT_ITEMS items (readingBenchLibrary), from
// its opening to the counts complete, and meanwhile walks the member's
// items as me.stats does for a store without counts (SavedItemsPage of
// the inbox and the archive, 500 a page): each walk's answer and the
// counts once complete are those the items were written with.
// HEARTH_RECOUNT_WALKS=0 leaves the catch-up alone (the walks share the
// cores with it).
//
//	HEARTH_RECOUNT_ITEMS=100000 go test -tags nobadger,nomysql,nopgx \
//	  -run TestReadingCountsCatchUpOfALargeStore -v ./storage/library/
func TestReadingCountsCatchUpOfALargeStore(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HEARTH_RECOUNT_ITEMS"))
	if n <= 0 {
		t.Skip("HEARTH_RECOUNT_ITEMS gives no number of items")
	}
	walk := os.Getenv("HEARTH_RECOUNT_WALKS") != "0"
	dir := t.TempDir()
	st, m := openBadgerAlice(t, dir)
	readingBenchLibrary(t, st, m.ID, n)
	now := storage.Now()
	after := []time.Time{now.AddDate(0, 0, -7), now.AddDate(0, -1, 0)}
	want, ok, err := Of(st).ReadingCounts(t.Context(), m.ID, after...)
	if err != nil || !ok {
		t.Fatalf("reading counts: ok %v, %v", ok, err)
	}
	if walked := walkReadingCounts(t, st, m.ID, after); !sameReadingCounts(walked, want) {
		t.Fatalf("the items walked: %+v, the counts %+v", walked, want)
	}
	asVersion8(t, st, m.ID)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st = openBadgerWith(t, dir, defaultOptions())
	defer st.Close()
	var walks int
	var walking time.Duration
	for {
		got, ok, err := Of(st).ReadingCounts(t.Context(), m.ID, after...)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			took := time.Since(start)
			if !sameReadingCounts(got, want) {
				t.Fatalf("the counts caught up: %+v, want %+v", got, want)
			}
			t.Logf("%d items: reading counts caught up %v after the opening, %.0f items/s; %d walks of the items meanwhile, %v each",
				n, took.Round(time.Millisecond), float64(n)/took.Seconds(), walks, (walking / time.Duration(max(walks, 1))).Round(time.Millisecond))
			return
		}
		if time.Since(start) > 10*time.Minute {
			t.Fatal("the reading counts are not caught up after ten minutes")
		}
		if !walk {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		w0 := time.Now()
		if walked := walkReadingCounts(t, st, m.ID, after); !sameReadingCounts(walked, want) {
			t.Fatalf("me.stats's walk during the catch-up: %+v, want %+v", walked, want)
		}
		walks++
		walking += time.Since(w0)
	}
}

// walkReadingCounts counts what ReadingCounts keeps from the member's
// items, walked as me.stats walks them for a store without counts.
func walkReadingCounts(t testing.TB, st *storage.Store, memberID string, after []time.Time) ReadingCounts {
	t.Helper()
	c := ReadingCounts{ReadAfter: make([]int64, len(after))}
	for _, status := range []string{StatusActive, StatusArchived} {
		p := PageRequest{Field: SortCreatedAt, First: 500}
		for {
			page, err := Of(st).SavedItemsPage(t.Context(), memberID, ItemFilter{Status: status}, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				c.Items++
				c.Words += int64(it.WordCount)
				if it.ReadAt == nil {
					continue
				}
				c.Read++
				c.ReadWords += int64(it.WordCount)
				for i, b := range after {
					if it.ReadAt.After(b) {
						c.ReadAfter[i]++
					}
				}
			}
			if p.After = page.NextAfter(); p.After == "" {
				break
			}
		}
	}
	return c
}

func sameReadingCounts(a, b ReadingCounts) bool {
	return a.Items == b.Items && a.Words == b.Words && a.Read == b.Read && a.ReadWords == b.ReadWords && slices.Equal(a.ReadAfter, b.ReadAfter)
}

// BenchmarkReadingCountsOfAFullMinute times ReadingCounts of the items
// read after a time in a minute that holds 60,000 reads, each at its own
// millisecond (an import's dates), the bound at the minute's start (the
// reads after it in its minute are all of them) and at its end (none).
func BenchmarkReadingCountsOfAFullMinute(b *testing.B) {
	st, m := openSavedTest(b)
	const n = 60_000
	minute := storage.Now().Add(-time.Hour).Truncate(time.Minute)
	for i := 0; i < n; i += 200 {
		err := st.Update(b.Context(), func(tx *storage.Tx) error {
			for j := i; j < i+200; j++ {
				at := minute.Add(time.Duration(j) * time.Millisecond)
				it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive,
					Title: "t", CreatedAt: at, UpdatedAt: at, ReadAt: &at}
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
	waitIndexed(b, st, m.ID)
	for _, c := range []struct {
		name  string
		after time.Time
		want  int64
	}{{"start", minute, n - 1}, {"end", minute.Add(time.Minute - time.Millisecond), 0}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				got, ok, err := Of(st).ReadingCounts(b.Context(), m.ID, c.after)
				if err != nil || !ok || got.ReadAfter[0] != c.want {
					b.Fatalf("read after %v: %+v, %v (%v), want %d", c.after, got, ok, err, c.want)
				}
			}
		})
	}
}

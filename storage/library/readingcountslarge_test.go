package library

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

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

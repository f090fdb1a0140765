package library

import (
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/members"
)

// BenchmarkEmptyTrash5000 times emptyTrash on a trash of 5,000 imported
// items (without fsync: the work, not the disk's syncs): what the member
// waits for. It reports besides how long the store took until the trash
// was empty (the background part included), in ms.
func BenchmarkEmptyTrash5000(b *testing.B) {
	const n = 5000
	var untilEmpty time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, m := openSavedTest(b)
		fillTrash(b, st, m.ID, n)
		b.StartTimer()
		start := time.Now()
		got, err := Of(st).EmptyTrash(b.Context(), m.ID)
		b.StopTimer()
		if err != nil || got != n {
			b.Fatalf("emptyTrash = %d, %v", got, err)
		}
		waitEmptied(b, st, m.ID)
		untilEmpty += time.Since(start)
		if left := trashLeft(b, st, m.ID); left != 0 {
			b.Fatalf("%d items left", left)
		}
	}
	b.ReportMetric(float64(untilEmpty.Milliseconds())/float64(b.N), "ms-until-empty/op")
}

// BenchmarkTrashPageWhileEmptying times the first page of a trash of
// 100,000 items right after emptyTrash answered (the background part held:
// 99,000 items still stored, hidden), whose one item a client may see was
// trashed after the answer with the oldest date: limit=none passes over
// every hidden item in one page (maxHiddenPassed out of reach, as before
// the pages had that bound), limit=default has the store's default. It
// reports besides the pages a client asks to reach that item
// (pages-to-item).
func BenchmarkTrashPageWhileEmptying(b *testing.B) {
	for _, c := range []struct {
		name  string
		limit int
	}{{"limit=none", 1 << 30}, {"limit=default", defaultOptions().maxHiddenPassed}} {
		b.Run(c.name, func(b *testing.B) {
			o := testOptions()
			o.maxHiddenPassed = c.limit
			st := openTest(b, o)
			m, err := members.Of(st).CreateMember(b.Context(), "alice", "", "correct horse")
			if err != nil {
				b.Fatal(err)
			}
			const n = 100000
			fillTrash(b, st, m.ID, n)
			waitIndexed(b, st, m.ID)
			worker := Of(st).state().Indexer
			worker.Hold()
			defer worker.Release()
			if got, err := Of(st).EmptyTrash(b.Context(), m.ID); err != nil || got != n {
				b.Fatalf("emptyTrash = %d, %v", got, err)
			}
			j, err := Of(st).CreateImportJob(b.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "y.zip", Staged: "/tmp/y", Total: 1})
			if err != nil {
				b.Fatal(err)
			}
			late := ImportEntry{Pos: 1, Item: &ImportItem{URL: "https://example.com/late", Title: "Late",
				CreatedAt: time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), Status: StatusDeleted}}
			if _, err := Of(st).ImportItems(b.Context(), m.ID, j.ID, []ImportEntry{late}, nil, 0); err != nil {
				b.Fatal(err)
			}
			f, p := ItemFilter{Status: StatusDeleted}, PageRequest{Field: SortCreatedAt, Desc: true, First: 100}
			pages := 0
			for q := p; ; {
				page, err := Of(st).SavedItemsPage(b.Context(), m.ID, f, q)
				if err != nil {
					b.Fatal(err)
				}
				pages++
				if len(page.Items) > 0 {
					break
				}
				if q.After = page.NextAfter(); q.After == "" {
					b.Fatal("the late item is never listed")
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := Of(st).SavedItemsPage(b.Context(), m.ID, f, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(pages), "pages-to-item")
		})
	}
}

package library

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// A store may hold reads dated any time at all, written before imports
// bounded read dates (an import kept a Unix time of any size): the items
// read after year 9999, however many and however far apart, are counted in
// as few keys as one item, so that me.stats reads no more keys for them
// (readAfter), and are still found read after a time before.
func TestReadingCountsOfReadsPastYear9999AreBounded(t *testing.T) {
	st, m := openAlice(t)
	lib := Of(st)
	job, err := lib.CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: 100})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	var entries []ImportEntry
	for i := range n {
		entries = append(entries, ImportEntry{Pos: i + 1, Item: &ImportItem{URL: fmt.Sprintf("https://a.example/%d", i), Title: fmt.Sprint(i)}})
	}
	if _, err := lib.ImportItems(t.Context(), m.ID, job.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
	// Each read a century after the one before, as such a store holds
	// them: each in a span of 32768 days of its own.
	for _, it := range itemsOf(t, st, m.ID) {
		var i int
		fmt.Sscan(it.Title, &i)
		r := time.Date(10000+100*i, 1, 1, 0, 0, 0, i, time.UTC)
		if _, err := lib.updateItems(t.Context(), m.ID, []string{it.ID}, func(_ *storage.Tx, it *SavedItem) error {
			it.ReadAt = &r
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	week := now.AddDate(0, 0, -7)
	c, ok, err := lib.ReadingCounts(t.Context(), m.ID, week, time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC))
	if err != nil || !ok {
		t.Fatalf("reading counts: ok %v, %v", ok, err)
	}
	if c.Read != n || c.ReadAfter[0] != n || c.ReadAfter[1] != n {
		t.Fatalf("read %d, after a week ago %d, after year 9999 %d: want %d each", c.Read, c.ReadAfter[0], c.ReadAfter[1], n)
	}
	// The keys of reads later than now, of every span and the instants:
	// more than what readAfter reads for any time before now.
	keys := 0
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		keys = 0
		for _, b := range readBuckets(now) {
			prefix := filterCountKey(m.ID, b.kind, "")
			if err := tx.Scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
				if bytes.Compare(k[len(prefix):], []byte(b.value)) > 0 {
					keys++
				}
				return true, nil
			}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if keys > len(readSpans)+1 {
		t.Fatalf("%d keys count the reads after now, %d items read after year 9999: want at most %d", keys, n, len(readSpans)+1)
	}
}

// An export may give an item any word count: one too large to add up
// (past what an item's text can hold) costs the counts of the member's
// other items nothing, before or after it is gone.
func TestReadingCountsOfAnImportedWordCountTooLargeToAddUp(t *testing.T) {
	st, m := openAlice(t)
	lib := Of(st)
	job, err := lib.CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: 2})
	if err != nil {
		t.Fatal(err)
	}
	entries := []ImportEntry{
		{Pos: 1, Item: &ImportItem{URL: "https://a.example/huge", Title: "huge", WordCount: math.MaxInt64}},
		{Pos: 2, Item: &ImportItem{URL: "https://a.example/short", Title: "short", WordCount: 10}},
	}
	if _, err := lib.ImportItems(t.Context(), m.ID, job.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
	checkReadingCounts(t, st, m.ID)
	var huge string
	for _, it := range itemsOf(t, st, m.ID) {
		if it.Title == "huge" {
			huge = it.ID
		}
	}
	if _, err := lib.SetItemsStatus(t.Context(), m.ID, []string{huge}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	c, ok, err := lib.ReadingCounts(t.Context(), m.ID)
	if err != nil || !ok || c.Items != 1 || c.Words != 10 {
		t.Fatalf("with the huge item in the trash: %+v (ok %v, %v), want the short item's 10 words", c, ok, err)
	}
	checkReadingCounts(t, st, m.ID)
}

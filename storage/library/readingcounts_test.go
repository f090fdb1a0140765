package library

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
)

// itemsOf reads the member's items.
func itemsOf(t testing.TB, st *storage.Store, memberID string) []SavedItem {
	t.Helper()
	var out []SavedItem
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		out = nil
		return tx.Scan(itemKey(memberID, ""), nil, false, false, func(_, v []byte) (bool, error) {
			var it SavedItem
			if err := parseItemRecord(v, &it); err != nil {
				return false, err
			}
			out = append(out, it)
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkReadingCounts fails when the member's reading counts, and the
// items they find read after each of the times around those the items
// were read at (the instant itself, the start of each span it is counted
// in, and a nanosecond before and after each of those), are
// not those of its items in the inbox and the archive.
func checkReadingCounts(t testing.TB, st *storage.Store, memberID string) {
	t.Helper()
	checkFilterCounts(t, st, memberID)
	var want ReadingCounts
	var reads []time.Time
	items := itemsOf(t, st, memberID)
	for _, it := range items {
		if it.Status != StatusActive && it.Status != StatusArchived {
			continue
		}
		want.Items++
		want.Words += int64(it.WordCount)
		if it.ReadAt != nil {
			want.Read++
			want.ReadWords += int64(it.WordCount)
			reads = append(reads, *it.ReadAt)
		}
	}
	var after []time.Time
	for _, r := range reads {
		bounds := []time.Time{r}
		for _, sp := range readSpans {
			bounds = append(bounds, time.Unix(floorDiv(r.Unix(), sp.secs)*sp.secs, 0))
		}
		for _, b := range bounds {
			after = append(after, b, b.Add(-1), b.Add(1))
		}
	}
	after = append(after, time.Unix(0, 0), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, b := range after {
		n := int64(0)
		for _, r := range reads {
			if r.After(b) {
				n++
			}
		}
		want.ReadAfter = append(want.ReadAfter, n)
	}
	got, ok, err := Of(st).ReadingCounts(t.Context(), memberID, after...)
	if err != nil || !ok {
		t.Fatalf("reading counts: ok %v, %v", ok, err)
	}
	if got.Items != want.Items || got.Words != want.Words || got.Read != want.Read || got.ReadWords != want.ReadWords {
		t.Fatalf("reading counts %+v, want %+v", got, want)
	}
	for i, b := range after {
		if got.ReadAfter[i] != want.ReadAfter[i] {
			t.Fatalf("read after %v: %d, want %d", b, got.ReadAfter[i], want.ReadAfter[i])
		}
	}
}

// The reading counts follow every change of the items (saves, saves
// again, fetches that change the word count, reads and unreads, progress,
// archiving, the trash and its restore, emptying, deletes, imports of
// items read at other times) in their transactions, on either engine.
func TestReadingCountsFollowRandomChanges(t *testing.T) {
	st, m := openAlice(t)
	lib := Of(st)
	rng := rand.New(rand.NewPCG(7, 31))
	job, err := lib.CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// Imported reads cluster at day, hour and minute bounds and share
	// instants (imports keep milliseconds).
	base := time.Date(2026, 3, 10, 23, 59, 59, 998_000_000, time.UTC)
	day := 24 * time.Hour
	readTimes := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, -time.Hour, 61 * time.Second, -7 * day, -31 * day,
		400 * day, -1100 * day, 3000 * day, 40000 * day}
	n, pos := 0, 0
	some := func() []string {
		items := itemsOf(t, st, m.ID)
		var ids []string
		for _, it := range items {
			if rng.IntN(3) == 0 {
				ids = append(ids, it.ID)
			}
		}
		if len(ids) == 0 && len(items) > 0 {
			ids = []string{items[rng.IntN(len(items))].ID}
		}
		return ids
	}
	ops := []func() error{
		func() error { // save
			n++
			_, _, err := lib.SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://a.example/%d", n), Title: "t", Text: "x", WordCount: rng.IntN(2000)})
			return err
		},
		func() error { // save again, another word count
			_, _, err := lib.SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://a.example/%d", rng.IntN(n+1)), Title: "t", Text: "y", WordCount: rng.IntN(2000)})
			return err
		},
		func() error { // a fetch that finishes with its word count
			n++
			it, err := lib.QueueFetch(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://a.example/%d", n)}, false)
			if err != nil {
				return err
			}
			_, err = lib.FinishFetch(t.Context(), m.ID, it.ID, NewItem{URL: it.OriginalURL, Title: "f", Text: "z", WordCount: 1 + rng.IntN(2000)})
			return err
		},
		func() error { _, err := lib.SetItemsRead(t.Context(), m.ID, some(), rng.IntN(3) > 0); return err },
		func() error {
			ids := some()
			if len(ids) == 0 {
				return nil
			}
			_, err := lib.UpdateReadingProgress(t.Context(), m.ID, ids[0], 100)
			return err
		},
		func() error { _, err := lib.SetItemsStatus(t.Context(), m.ID, some(), StatusArchived); return err },
		func() error { _, err := lib.SetItemsStatus(t.Context(), m.ID, some(), StatusDeleted); return err },
		func() error { _, err := lib.SetItemsStatus(t.Context(), m.ID, some(), StatusActive); return err },
		func() error { _, err := lib.EmptyTrash(t.Context(), m.ID); return err },
		func() error { // deleted for good, from the trash
			var ids []string
			for _, it := range itemsOf(t, st, m.ID) {
				if it.Status == StatusDeleted && rng.IntN(2) == 0 {
					ids = append(ids, it.ID)
				}
			}
			if len(ids) == 0 {
				return nil
			}
			return lib.PermanentlyDeleteItems(t.Context(), m.ID, ids)
		},
		func() error { // an import, of items read or not, some again
			var entries []ImportEntry
			for range 1 + rng.IntN(6) {
				n++
				pos++
				in := &ImportItem{URL: fmt.Sprintf("https://a.example/%d", n-rng.IntN(2)*rng.IntN(n)), Title: "i", WordCount: rng.IntN(2000),
					Status: []string{StatusActive, StatusArchived, StatusDeleted}[rng.IntN(3)]}
				if rng.IntN(4) > 0 {
					r := base.Add(readTimes[rng.IntN(len(readTimes))])
					in.ReadAt = &r
				}
				entries = append(entries, ImportEntry{Pos: pos, Item: in})
			}
			_, err := lib.ImportItems(t.Context(), m.ID, job.ID, entries, nil, 0)
			return err
		},
	}
	read, trashed := false, false // a read item archived, in the trash, at some step
	for i := range 150 {
		op := rng.IntN(len(ops))
		if i < 3 {
			op = 0 // items to change
		}
		if err := ops[op](); err != nil {
			t.Fatalf("step %d (op %d): %v", i, op, err)
		}
		checkReadingCounts(t, st, m.ID)
		items := itemsOf(t, st, m.ID)
		read = read || slices.ContainsFunc(items, func(it SavedItem) bool { return it.ReadAt != nil && it.Status == StatusArchived })
		trashed = trashed || slices.ContainsFunc(items, func(it SavedItem) bool { return it.ReadAt != nil && it.Status == StatusDeleted })
	}
	if !read || !trashed {
		t.Fatalf("the changes left no read item archived (%v) or in the trash (%v): the test checks less than it says", read, trashed)
	}
}

// A store written before the reading counts (version 8) has its
// statistics read from its items until the indexer has counted them,
// batch by batch; writes meanwhile, on either side of the catch-up's
// cursor, and a catch-up stopped half-way leave the counts exact.
func TestReadingCountsCaughtUpOnAnOlderStore(t *testing.T) {
	dir := t.TempDir()
	st, m := openBadgerAlice(t, dir)
	lib := Of(st)
	var ids []string
	for i := range 12 {
		it, _, err := lib.SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://a.example/%d", i), Title: "t", Text: "x", WordCount: 100 + i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(lib.SetItemsRead(t.Context(), m.ID, ids[:8], true))
	must(lib.SetItemsStatus(t.Context(), m.ID, ids[6:8], StatusArchived))
	must(lib.SetItemsStatus(t.Context(), m.ID, ids[8:9], StatusDeleted))
	checkReadingCounts(t, st, m.ID)
	asVersion8(t, st, m.ID)
	if _, ok, err := lib.ReadingCounts(t.Context(), m.ID); err != nil || ok {
		t.Fatalf("an older store's reading counts: ok %v (%v), want none", ok, err)
	}
	// Written before any catch-up: counted by the catch-up alone.
	must(lib.SetItemsRead(t.Context(), m.ID, ids[:1], false))
	calls := 0
	if err := lib.recountReading(m.ID, func() bool { calls++; return calls > 2 }, 3); !errors.Is(err, textindex.ErrStopped) {
		t.Fatalf("a catch-up stopped after two batches: %v", err)
	}
	if _, ok, err := lib.ReadingCounts(t.Context(), m.ID); err != nil || ok {
		t.Fatalf("reading counts half counted: ok %v (%v), want none", ok, err)
	}
	// Items counted (up to the cursor) and not yet.
	must(lib.SetItemsRead(t.Context(), m.ID, ids[1:3], false))
	must(lib.SetItemsStatus(t.Context(), m.ID, []string{ids[3], ids[10]}, StatusDeleted))
	must(lib.SetItemsRead(t.Context(), m.ID, ids[9:], true))
	must(lib.SetItemsStatus(t.Context(), m.ID, []string{ids[4], ids[11]}, StatusArchived))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.recountChunkSize = 2 // several batches
	st = openBadgerWith(t, dir, o)
	defer st.Close()
	waitIndexed(t, st, m.ID)
	checkReadingCounts(t, st, m.ID)
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		if ok, err := tx.Has(readingCursorKey(m.ID)); err != nil || ok {
			return fmt.Errorf("the catch-up's cursor left behind (%v)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, _, err := Of(st).ReadingCounts(t.Context(), m.ID)
	if err != nil || got.Items != 9 || got.Read != 6 {
		t.Fatalf("after the catch-up: %+v (%v), want 9 items, 6 read", got, err)
	}
}

// asVersion8 leaves the member's store as version 8 left it: no reading
// counts (deleted in batches: a large library's are more than one
// transaction holds), the search keys of that version.
func asVersion8(t testing.TB, st *storage.Store, memberID string) {
	t.Helper()
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		return tx.Put(textReadyKey(memberID), []byte{8}, 0)
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeletePrefixInBatches(t.Context(), readingCountsPrefix(memberID)); err != nil {
		t.Fatal(err)
	}
}

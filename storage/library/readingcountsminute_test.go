package library

import (
	"fmt"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// importReadsOfOneMinute imports n items read within one minute, an hour
// ago, each at a millisecond of its own but every tenth at the one before
// it, some on a second's first millisecond and some on its last, and
// returns the minute.
func importReadsOfOneMinute(t *testing.T, st *storage.Store, memberID string, n int) time.Time {
	t.Helper()
	lib := Of(st)
	minute := storage.Now().Add(-time.Hour).Truncate(time.Minute)
	job, err := lib.CreateImportJob(t.Context(), &ImportJob{MemberID: memberID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: n})
	if err != nil {
		t.Fatal(err)
	}
	var entries []ImportEntry
	ms := 0
	for i := range n {
		switch {
		case i%10 == 9: // the millisecond before's
		case i%7 == 0:
			ms = (ms/1000 + 1) * 1000 // a second's first
		case i%11 == 0:
			ms = (ms/1000+1)*1000 + 999 // a second's last
		default:
			ms += 1 + i%150
		}
		r := minute.Add(time.Duration(ms%60000) * time.Millisecond)
		entries = append(entries, ImportEntry{Pos: i + 1, Item: &ImportItem{URL: fmt.Sprintf("https://a.example/%d", i), Title: "t", WordCount: 10 + i, ReadAt: &r}})
	}
	if _, err := lib.ImportItems(t.Context(), memberID, job.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
	return minute
}

// Reads of an import, many to a minute and to a second: the items read
// after any time, at a read, a nanosecond either side of it and at the
// start of each span (seconds to 32768 days) around it, are those read
// after it, and stay so as some are marked unread and read again within
// the minute. On Badger only, to keep the PostgreSQL suite short (each
// read is checked at some 30 bounds, each bound a walk of the counts): the
// seconds' counts are written by the one item writer that
// TestReadingCountsFollowRandomChanges checks on both engines.
func TestReadingCountsOfManyReadsInOneMinute(t *testing.T) {
	st, m := openBadgerAlice(t, t.TempDir())
	minute := importReadsOfOneMinute(t, st, m.ID, 100)
	checkReadingCounts(t, st, m.ID)
	var ids []string
	for _, it := range itemsOf(t, st, m.ID) {
		ids = append(ids, it.ID)
	}
	if _, err := Of(st).SetItemsRead(t.Context(), m.ID, ids[:40], false); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids[:20] {
		r := minute.Add(time.Duration(i*1500) * time.Millisecond)
		if _, err := Of(st).updateItems(t.Context(), m.ID, []string{id}, func(_ *storage.Tx, it *SavedItem) error {
			it.ReadAt = &r
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkReadingCounts(t, st, m.ID)
}

// A store as version 9 left it, its reading counts without the seconds
// (rs), has them counted again by the indexer once opened: the items read
// after any time are then those read after it.
func TestReadingCountsOfAVersion9StoreCountedAgain(t *testing.T) {
	dir := t.TempDir()
	st, m := openBadgerAlice(t, dir)
	importReadsOfOneMinute(t, st, m.ID, 120)
	waitIndexed(t, st, m.ID)
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.DeletePrefix(filterCountKey(m.ID, "rs", "")); err != nil {
			return err
		}
		return tx.Put(textReadyKey(m.ID), []byte{9}, 0)
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Of(st).ReadingCounts(t.Context(), m.ID); err != nil || ok {
		t.Fatalf("a version 9 store's reading counts: ok %v (%v), want none", ok, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openBadgerWith(t, dir, testOptions())
	defer st.Close()
	waitIndexed(t, st, m.ID)
	checkReadingCounts(t, st, m.ID)
}

package graphql_test

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

const statsQuery = `query GetUserStats { me { id stats { itemsReadCountAllTime itemsReadCountMonth itemsReadCountWeek estimatedReadingTimeCompleted wordsReadCount unreadCount readCount averageArticleLength averageTimeToFinish } } }`

type userStats struct {
	ItemsReadCountAllTime, ItemsReadCountMonth, ItemsReadCountWeek, EstimatedReadingTimeCompleted float64
	WordsReadCount, UnreadCount, ReadCount, AverageArticleLength, AverageTimeToFinish             float64
}

// statsItem is what me.stats sees of an item.
type statsItem struct {
	words  int
	readAt *time.Time
	status string
}

// wantStats are the statistics of items as Inboxt's me.stats gives them:
// of the inbox and the archive, read meaning readAt set, the week and the
// month those read after now minus 7 days and minus a month, 200 words a
// minute.
func wantStats(items map[string]*statsItem, now time.Time) userStats {
	var w userStats
	var n, words float64
	for _, it := range items {
		if it.status != library.StatusActive && it.status != library.StatusArchived {
			continue
		}
		n++
		words += float64(it.words)
		if it.readAt == nil {
			w.UnreadCount++
			continue
		}
		w.ReadCount++
		w.WordsReadCount += float64(it.words)
		if it.readAt.After(now.AddDate(0, 0, -7)) {
			w.ItemsReadCountWeek++
		}
		if it.readAt.After(now.AddDate(0, -1, 0)) {
			w.ItemsReadCountMonth++
		}
	}
	w.ItemsReadCountAllTime = w.ReadCount
	w.EstimatedReadingTimeCompleted = math.Ceil(w.WordsReadCount / 200)
	if n > 0 {
		w.AverageArticleLength = math.Round(words / n)
	}
	return w
}

// Inboxt's me.stats counts the items of the inbox and the archive, not
// the trash's; the week and the month end exactly 7 days and a calendar
// month before the server's clock, to the millisecond an import keeps;
// and the answer follows every move of the items: imports of read
// items, reads and unreads, archiving, the trash, its restore and its
// emptying, deletes.
func TestStatsFollowReadsMovesAndTheClock(t *testing.T) {
	now0 := time.Now().UTC().Truncate(time.Millisecond)
	var clock atomic.Int64
	clock.Store(now0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	e := newEnv(t, options{Now: now})
	week, month := now0.AddDate(0, 0, -7), now0.AddDate(0, -1, 0)
	at := func(t time.Time) *time.Time { return &t }
	items := map[string]*statsItem{}
	// Read at each side of the week's and the month's bounds, one in the
	// archive, one unread, one read in the trash.
	imported := []*library.ImportItem{
		{ReadAt: at(week)}, {ReadAt: at(week.Add(time.Millisecond))}, {ReadAt: at(week.Add(-time.Millisecond))},
		{ReadAt: at(month)}, {ReadAt: at(month.Add(time.Millisecond))}, {ReadAt: at(month.AddDate(0, 0, -1))},
		{ReadAt: at(now0.Add(-time.Hour)), Status: library.StatusArchived}, {},
		{ReadAt: at(now0.Add(-2 * time.Hour)), Status: library.StatusDeleted},
	}
	lib := library.Of(e.store)
	j, err := lib.CreateImportJob(t.Context(), &library.ImportJob{MemberID: e.member.ID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: len(imported)})
	if err != nil {
		t.Fatal(err)
	}
	var entries []library.ImportEntry
	for i, in := range imported {
		in.URL, in.Title, in.WordCount = fmt.Sprintf("https://example.com/s/%d", i), "Read", 150+37*i
		entries = append(entries, library.ImportEntry{Pos: i + 1, Item: in})
	}
	if _, err := lib.ImportItems(t.Context(), e.member.ID, j.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, in := range imported {
		id, err := lib.ImportedItemID(t.Context(), e.member.ID, in)
		if err != nil || id == "" {
			t.Fatalf("imported item %d: %q, %v", i, id, err)
		}
		st := in.Status
		if st == "" {
			st = library.StatusActive
		}
		ids = append(ids, id)
		items[id] = &statsItem{words: in.WordCount, readAt: in.ReadAt, status: st}
	}
	check := func(step string) {
		t.Helper()
		var out struct{ Me struct{ Stats userStats } }
		e.do(statsQuery, nil, &out)
		if want := wantStats(items, now()); out.Me.Stats != want {
			t.Fatalf("%s: stats\n got %+v\nwant %+v", step, out.Me.Stats, want)
		}
	}
	check("imported")
	var out struct{ Me struct{ Stats userStats } }
	e.do(statsQuery, nil, &out)
	if s := out.Me.Stats; s.ReadCount != 7 || s.ItemsReadCountWeek != 2 || s.ItemsReadCountMonth != 5 || s.UnreadCount != 1 {
		t.Fatalf("imported: %+v, want 7 read, 2 this week, 5 this month, 1 unread", s)
	}
	// The clock, a millisecond on either side: the items read at the
	// bounds move in and out of the week and the month.
	for _, d := range []time.Duration{-time.Millisecond, time.Millisecond, -time.Nanosecond, 24 * time.Hour, 0} {
		clock.Store(now0.Add(d).UnixNano())
		check(fmt.Sprint("the clock at ", d))
	}
	setStatus := func(status string, which ...string) {
		t.Helper()
		e.do(updateStatusMutation, map[string]any{"data": map[string]any{"ids": which, "status": status}}, nil)
		for _, id := range which {
			items[id].status = status
		}
	}
	setRead := func(read bool, which ...string) {
		t.Helper()
		var rs struct{ UpdateSavedItemsReadStatus []savedItemOut }
		e.do(readStatusMutation, map[string]any{"data": map[string]any{"ids": which, "isRead": read}}, &rs)
		for _, it := range rs.UpdateSavedItemsReadStatus {
			items[it.ID].readAt = nil
			if it.ReadAt != nil {
				r, err := time.Parse(time.RFC3339Nano, *it.ReadAt)
				if err != nil {
					t.Fatal(err)
				}
				items[it.ID].readAt = &r
			}
		}
	}
	setStatus("DELETED", ids[1], ids[6])
	check("two read items in the trash")
	setStatus("ACTIVE", ids[1], ids[6])
	check("restored")
	setStatus("ARCHIVED", ids[0], ids[7])
	check("archived")
	setRead(false, ids[1], ids[4])
	check("marked unread")
	setRead(true, ids[7], ids[8])
	check("marked read, one of them in the trash")
	setStatus("DELETED", ids[2])
	e.doAs(e.session, emptyTrashMutation, nil, nil)
	for _, id := range []string{ids[2], ids[8]} {
		delete(items, id)
	}
	check("the trash emptied")
	setStatus("DELETED", ids[3])
	e.doAs(e.session, permanentlyDeleteMutation, map[string]any{"data": map[string]any{"ids": []string{ids[3]}}}, nil)
	delete(items, ids[3])
	check("deleted for good")
	it := e.saveArticle(e.member.ID, 7, nil)
	items[it.ID] = &statsItem{words: it.WordCount, status: library.StatusActive}
	check("saved")
}

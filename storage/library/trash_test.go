package library

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/internal/testchild"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// fillTrash imports n items straight into the member's trash, saved a
// minute apart in the order of the import (the order an emptying walks).
func fillTrash(t testing.TB, st *storage.Store, memberID string, n int) {
	t.Helper()
	j, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: memberID, Format: "POCKET", FileName: "x.zip", Staged: "/tmp/x", Total: n})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	entries := make([]ImportEntry, n)
	for i := range entries {
		entries[i] = ImportEntry{Pos: i + 1, Item: &ImportItem{URL: fmt.Sprintf("https://example.com/trash/%d", i),
			Title: fmt.Sprintf("Trashed %d", i), CreatedAt: base.Add(time.Duration(i) * time.Minute), Status: StatusDeleted}}
	}
	if _, err := Of(st).ImportItems(t.Context(), memberID, j.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
}

// statusOf is where the member's item id is now: its status, or "gone".
func statusOf(t testing.TB, st *storage.Store, memberID, id string) string {
	t.Helper()
	it, err := Of(st).SavedItem(t.Context(), memberID, id)
	if err != nil {
		return "gone"
	}
	return it.Status
}

// trashLeft counts the items of the member's trash, from the index.
func trashLeft(t testing.TB, st *storage.Store, memberID string) int {
	t.Helper()
	n := 0
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		var err error
		n, err = trashCount(tx, memberID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitEmptied waits until no emptying of the member's trash is under way
// (the background worker's end of it).
func waitEmptied(t testing.TB, st *storage.Store, memberID string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var left bool
		if err := st.View(context.Background(), func(tx *storage.Tx) error {
			var err error
			left, err = tx.Has(emptyingKey(memberID))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !left {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the emptying of the trash never ended; %d items left in the trash", trashLeft(t, st, memberID))
		}
	}
}

// An item moved to the trash while the trash is being emptied (from
// another device, while the request runs) stays there; one the emptying
// is to delete cannot be restored (the member was told it is deleted), but
// its URL saved again is a new item in the inbox, which stays: the emptying deletes what
// was in the trash when the member asked, and the answer counts that.
func TestEmptyTrashDeletesOnlyWhatWasInTheTrash(t *testing.T) {
	st, m := openAlice(t)
	const n = 5000
	fillTrash(t, st, m.ID, n)
	late, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/late", Title: "Trashed late"})
	if err != nil {
		t.Fatal(err)
	}
	newest := newestInTrash(t, st, m.ID)
	newestItem, err := Of(st).SavedItem(t.Context(), m.ID, newest)
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		n   int
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		n, err := Of(st).EmptyTrash(context.Background(), m.ID)
		answered <- answer{n, err}
	}()
	// Once the emptying has deleted some, the member trashes another item,
	// tries to restore the last of those the emptying is to delete, and
	// saves its URL again.
	for trashLeft(t, st, m.ID) == n {
		time.Sleep(time.Millisecond)
	}
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{late.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{newest}, StatusArchived); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("restoring an item the emptying is to delete: %v, want not found", err)
	}
	if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: newestItem.OriginalURL, Title: "Saved again"}); err != nil {
		t.Fatal(err)
	}
	a := <-answered
	if a.err != nil || a.n != n {
		t.Fatalf("emptyTrash = %d, %v; want %d, the items in the trash when it was asked", a.n, a.err, n)
	}
	waitEmptied(t, st, m.ID)
	if got := statusOf(t, st, m.ID, late.ID); got != StatusDeleted {
		t.Errorf("the item trashed while the trash was emptied is %s, want still in the trash", got)
	}
	if got := statusOf(t, st, m.ID, newest); got != "gone" {
		t.Errorf("the item saved again while the trash was emptied is %s, want gone (its URL saved again is a new item)", got)
	}
	if again, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: newestItem.OriginalURL}); err != nil || created || again.Status != StatusActive {
		t.Errorf("the URL saved while the trash was emptied: created %v, status %s, %v; want the item saved then, in the inbox", created, again.Status, err)
	}
	if left := trashLeft(t, st, m.ID); left != 1 {
		t.Errorf("%d items left in the trash, want 1 (the one trashed late)", left)
	}
	if c, ok, err := Of(st).StatusCount(t.Context(), m.ID, StatusDeleted); err != nil || !ok || c != 1 {
		t.Errorf("trash count %d (%v, %v), want 1", c, ok, err)
	}
	// The next emptying takes it.
	if got, err := Of(st).EmptyTrash(t.Context(), m.ID); err != nil || got != 1 {
		t.Fatalf("second emptyTrash = %d, %v; want 1", got, err)
	}
	if got := statusOf(t, st, m.ID, late.ID); got != "gone" {
		t.Errorf("after the second emptying the late item is %s", got)
	}
}

// newestInTrash is the id of the last item of the member's trash in the
// order of creation (the last an emptying reaches).
func newestInTrash(t testing.TB, st *storage.Store, memberID string) string {
	t.Helper()
	var id string
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		return tx.Scan(itemIndexPrefix(memberID, StatusDeleted, SortCreatedAt), nil, true, true, func(k, _ []byte) (bool, error) {
			id = strconv.FormatUint(binary.BigEndian.Uint64(k[len(k)-8:]), 10)
			return false, nil
		})
	}); err != nil || id == "" {
		t.Fatalf("no item in the trash: %v", err)
	}
	return id
}

// A large trash is not emptied in the request: it deletes at most
// emptyTrashInRequest items and answers the trash's count; the library's
// worker deletes the rest.
func TestEmptyTrashOfALargeTrashFinishesInTheBackground(t *testing.T) {
	st, m := openAlice(t)
	const n = 5000
	fillTrash(t, st, m.ID, n)
	kept, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/kept", Title: "Kept"})
	if err != nil {
		t.Fatal(err)
	}
	worker := Of(st).state().Indexer
	worker.Hold() // until the request has answered
	got, err := Of(st).EmptyTrash(t.Context(), m.ID)
	left := trashLeft(t, st, m.ID)
	worker.Release()
	if err != nil || got != n {
		t.Fatalf("emptyTrash = %d, %v; want %d", got, err, n)
	}
	if left != n-emptyTrashInRequest {
		t.Fatalf("%d items left in the trash when the request answered, want %d (the request deletes %d)", left, n-emptyTrashInRequest, emptyTrashInRequest)
	}
	waitEmptied(t, st, m.ID)
	if left := trashLeft(t, st, m.ID); left != 0 {
		t.Fatalf("%d items left in the trash after the background part", left)
	}
	if got := statusOf(t, st, m.ID, kept.ID); got != StatusActive {
		t.Fatalf("an item of the inbox is %s after the trash was emptied", got)
	}
	ids := deletedSince(t, st, m.ID)
	if len(ids) != n {
		t.Fatalf("%d tombstones, want %d (updatesSince reports each deleted item)", len(ids), n)
	}
}

// deletedSince lists the member's tombstones (what updatesSince reports
// as deleted).
func deletedSince(t testing.TB, st *storage.Store, memberID string) []*Tombstone {
	t.Helper()
	gone, _, err := Of(st).Tombstones(t.Context(), memberID, time.Time{}, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return gone
}

// TestEmptyTrashKillHelper is the child of TestEmptyTrashResumesAfterKill:
// it empties alice's trash in the store of HEARTH_TRASH_DIR, prints the
// answer, moves the item HEARTH_TRASH_LATE to the trash and prints how
// many items the trash holds until it is killed.
func TestEmptyTrashKillHelper(t *testing.T) {
	dir := os.Getenv("HEARTH_TRASH_DIR")
	if dir == "" {
		t.Skip("child of TestEmptyTrashResumesAfterKill")
	}
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	st, err := openWith(dir, storage.Options{}, testOptions())
	if err != nil {
		fail(err)
	}
	m, err := members.Of(st).Member(t.Context(), "alice")
	if err != nil {
		fail(err)
	}
	n, err := Of(st).EmptyTrash(t.Context(), m.ID)
	if err != nil {
		fail(err)
	}
	fmt.Println("emptied", n)
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{os.Getenv("HEARTH_TRASH_LATE")}, StatusDeleted); err != nil {
		fail(err)
	}
	for {
		fmt.Println("left", trashLeft(t, st, m.ID))
		time.Sleep(5 * time.Millisecond)
	}
}

// A process killed (SIGKILL) after it answered emptyTrash, while its
// worker deletes the rest, leaves the emptying recorded: the store opened
// again finishes it, and the item trashed after the answer stays.
func TestEmptyTrashResumesAfterKill(t *testing.T) {
	badgerOnly(t)
	dir := t.TempDir()
	st, m := openBadgerAlice(t, dir)
	const n = 5000
	fillTrash(t, st, m.ID, n)
	late, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/late", Title: "Trashed late"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	child := testchild.Start(t, "TestEmptyTrashKillHelper", "HEARTH_TRASH_DIR="+dir, "HEARTH_TRASH_LATE="+late.ID)
	killedAt := -1
	for child.Lines.Scan() {
		line := child.Lines.Text()
		if strings.HasPrefix(line, "error:") {
			t.Fatal(line)
		}
		if line != "emptied "+strconv.Itoa(n) && strings.HasPrefix(line, "emptied") {
			t.Fatalf("child: %s; want emptied %d", line, n)
		}
		// Killed once the worker has begun on what the request left.
		if left, ok := strings.CutPrefix(line, "left "); ok {
			if k, _ := strconv.Atoi(left); k < n-emptyTrashInRequest+1 {
				killedAt = k
				child.Kill(t)
				break
			}
		}
	}
	child.WaitKilled(t)
	if killedAt <= 1 {
		t.Fatalf("the worker had finished (%d left) before the kill: the test needs a larger trash", killedAt)
	}
	t.Logf("killed with %d items in the trash", killedAt)

	st = openBadger(t, dir)
	defer st.Close()
	waitEmptied(t, st, m.ID)
	if left := trashLeft(t, st, m.ID); left != 1 {
		t.Errorf("%d items in the trash after the restart, want 1 (the one trashed late)", left)
	}
	if got := statusOf(t, st, m.ID, late.ID); got != StatusDeleted {
		t.Errorf("the item trashed after the answer is %s, want in the trash", got)
	}
	if ids := deletedSince(t, st, m.ID); len(ids) != n {
		t.Errorf("%d tombstones, want %d", len(ids), n)
	}
}

// trashPage lists the member's items of status (as ItemFilter.Status)
// whose text holds text ("" for any), a page of 100 as a client asks.
func trashPage(t testing.TB, st *storage.Store, memberID, status, text string) []string {
	t.Helper()
	page, err := Of(st).SavedItemsPage(t.Context(), memberID, ItemFilter{Status: status, Text: text}, PageRequest{Field: SortCreatedAt, Desc: true, First: 100})
	if err != nil {
		t.Fatal(err)
	}
	return pageIDs(page)
}

// statusCount is StatusCount, failing the test on an error or a count
// not built.
func statusCount(t testing.TB, st *storage.Store, memberID, status string) int {
	t.Helper()
	n, ok, err := Of(st).StatusCount(t.Context(), memberID, status)
	if err != nil || !ok {
		t.Fatalf("count of %s: %v (built %v)", status, err, ok)
	}
	return n
}

// highlightsListed is how many highlights the member's first page of
// highlights lists.
func highlightsListed(t testing.TB, st *storage.Store, memberID string) int {
	t.Helper()
	page, err := Of(st).HighlightsPage(t.Context(), memberID, ItemFilter{}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Highlights)
}

// highlightsExported is the items of the highlights the member's export
// of highlights holds (ForEachHighlight), in its order.
func highlightsExported(t testing.TB, st *storage.Store, memberID string) []string {
	t.Helper()
	var items []string
	err := Of(st).ForEachHighlight(t.Context(), memberID, func(h *Highlight) error {
		items = append(items, h.SavedItemID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// Once emptyTrash has answered, the items it is to delete are deleted for
// every client while the background deletes them: the trash's pages (a
// word search's too), counts, highlights and the highlights' export leave
// them out, reading one
// fails, and restoring one or adding a note fails as for an item that is
// not there; an item trashed
// after the answer is listed and counted, and the next emptying counts
// only it.
func TestEmptyTrashHidesWhatItIsToDelete(t *testing.T) {
	st, m := openAlice(t)
	const n = 3000
	fillTrash(t, st, m.ID, n)
	kept, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/kept", Title: "Kept"})
	if err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, st, m.ID)
	if err := Of(st).EnsureOffsets(t.Context(), m.ID); err != nil { // Omnivore's paging by offset
		t.Fatal(err)
	}
	// An item the request does not reach (it deletes the oldest first).
	stored := trashPage(t, st, m.ID, StatusDeleted, "")[99]
	note, err := Of(st).AddNote(t.Context(), m.ID, stored, "a note")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).AddNote(t.Context(), m.ID, kept.ID, "a note kept"); err != nil {
		t.Fatal(err)
	}
	if got := highlightsListed(t, st, m.ID); got != 2 {
		t.Fatalf("%d highlights listed, want the two notes", got)
	}
	if got := highlightsExported(t, st, m.ID); !slices.Equal(got, []string{stored, kept.ID}) {
		t.Fatalf("the highlights export holds those of %v, want both notes' items", got)
	}
	worker := Of(st).state().Indexer
	worker.Hold() // the background part waits, so that the test sees the trash being emptied
	release := sync.OnceFunc(worker.Release)
	defer release()
	if got, err := Of(st).EmptyTrash(t.Context(), m.ID); err != nil || got != n {
		t.Fatalf("emptyTrash = %d, %v; want %d", got, err, n)
	}
	if left := trashLeft(t, st, m.ID); left != n-emptyTrashInRequest {
		t.Fatalf("%d items still stored in the trash, want %d: the background part has not begun", left, n-emptyTrashInRequest)
	}

	for _, status := range []string{StatusDeleted, StatusAll} {
		for _, text := range []string{"", "trashed"} {
			got := trashPage(t, st, m.ID, status, text)
			want := []string{}
			if status == StatusAll && text == "" {
				want = []string{kept.ID}
			}
			if !slices.Equal(got, want) {
				t.Errorf("status %s, text %q: %d items listed (%v), want %v", status, text, len(got), got[:min(len(got), 3)], want)
			}
		}
	}
	if c := statusCount(t, st, m.ID, StatusDeleted); c != 0 {
		t.Errorf("trash count %d right after the answer, want 0", c)
	}
	if c := statusCount(t, st, m.ID, StatusAll); c != 1 {
		t.Errorf("count of every item %d, want 1 (the inbox's)", c)
	}
	// The offsets' counts hold the items being deleted: an offset of the
	// trash is walked instead (handlers/graphql's seekOffset).
	if c, total, _, err := Of(st).OffsetCursor(t.Context(), m.ID, StatusDeleted, true, 1); !errors.Is(err, ErrOffsetsNotReady) {
		t.Errorf("offset 1 of the trash: cursor %q, total %d, %v; want it walked (ErrOffsetsNotReady)", c, total, err)
	}
	if _, err := Of(st).SavedItem(t.Context(), m.ID, stored); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("reading an item being deleted: %v, want not found", err)
	}
	if items, err := Of(st).SavedItems(t.Context(), m.ID, []string{stored, kept.ID}); err != nil || len(items) != 1 || items[0].ID != kept.ID {
		t.Errorf("reading an item being deleted with another: %d items, %v; want the other only", len(items), err)
	}
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{stored}, StatusActive); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("restoring an item being deleted: %v, want not found", err)
	}
	if got := highlightsListed(t, st, m.ID); got != 1 {
		t.Errorf("%d highlights listed, want the kept item's only: the other's item is being deleted", got)
	}
	if got := highlightsExported(t, st, m.ID); !slices.Equal(got, []string{kept.ID}) {
		t.Errorf("the highlights export holds those of %v, want the kept item's only: the other's item is being deleted", got)
	}
	if _, err := Of(st).AddNote(t.Context(), m.ID, stored, "more"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a note on an item being deleted: %v, want not found", err)
	}
	// Its highlights by id, as Omnivore's updateHighlight and
	// deleteHighlight and the reader's note form reach them.
	if _, err := Of(st).Highlight(t.Context(), m.ID, note.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("reading the note of an item being deleted: %v, want not found", err)
	}
	if _, err := Of(st).SetHighlightNote(t.Context(), m.ID, note.ID, "changed"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("changing the note of an item being deleted: %v, want not found", err)
	}
	if err := Of(st).DeleteHighlights(t.Context(), m.ID, []string{note.ID}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("deleting the note of an item being deleted: %v, want not found", err)
	}

	// An item trashed after the answer is the trash's one item.
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{kept.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if got := trashPage(t, st, m.ID, StatusDeleted, ""); !slices.Equal(got, []string{kept.ID}) {
		t.Errorf("the trash lists %d items (%v), want the one trashed after the answer", len(got), got[:min(len(got), 3)])
	}
	if c := statusCount(t, st, m.ID, StatusDeleted); c != 1 {
		t.Errorf("trash count %d, want 1 (the item trashed after the answer)", c)
	}
	if got, err := Of(st).EmptyTrash(t.Context(), m.ID); err != nil || got != 1 {
		t.Fatalf("the next emptyTrash = %d, %v; want 1, the item the member saw", got, err)
	}
	release()
	waitEmptied(t, st, m.ID)
	if left := trashLeft(t, st, m.ID); left != 0 {
		t.Errorf("%d items left in the trash", left)
	}
	if gone := deletedSince(t, st, m.ID); len(gone) != n+1 {
		t.Errorf("%d tombstones, want %d", len(gone), n+1)
	}
}

// Two nodes of one site: node A answers emptyTrash of a large trash and
// stops right after; node B, running, carries the emptying on (it takes
// the emptyings' lease over, or A told it) without a restart and without
// the member doing anything more.
func TestEmptyTrashCarriedOnByAnotherNode(t *testing.T) {
	a, b := wordNodes.TwoNodesPrepared(t, func(st *storage.Store) { setOptions(st, testOptions()) })
	storagetest.Eventually(t, "both nodes listen", func() bool { return a.Live() && b.Live() })
	m, err := members.Of(a).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	fillTrash(t, a, m.ID, n)
	waitIndexed(t, a, m.ID)
	if got, err := Of(a).EmptyTrash(t.Context(), m.ID); err != nil || got != n {
		t.Fatalf("emptyTrash on A = %d, %v; want %d", got, err, n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	left := trashLeft(t, b, m.ID)
	if left == 0 {
		t.Fatal("A emptied the whole trash before it stopped: the test needs a larger trash")
	}
	t.Logf("A stopped with %d items left in the trash", left)
	if got := trashPage(t, b, m.ID, StatusDeleted, ""); len(got) != 0 {
		t.Errorf("B lists %d items of the trash being emptied", len(got))
	}
	waitEmptied(t, b, m.ID)
	if left := trashLeft(t, b, m.ID); left != 0 {
		t.Errorf("%d items left in the trash", left)
	}
	if gone := deletedSince(t, b, m.ID); len(gone) != n {
		t.Errorf("%d tombstones, want %d", len(gone), n)
	}
}

// An item a pending emptying hides is deleted for the member: saving its
// URL again, or importing it again, makes a new item in the inbox without
// the old one's note and labels (and gives the old one nothing the
// emptying then deletes); the emptying deletes the old one, and the URL
// finds the new one after it.
func TestSavingAgainAnItemBeingDeletedMakesANewItem(t *testing.T) {
	st, m := openAlice(t)
	const n = 3000
	fillTrash(t, st, m.ID, n)
	waitIndexed(t, st, m.ID)
	// Two items the request does not reach (it deletes the oldest first).
	trash := trashPage(t, st, m.ID, StatusDeleted, "")
	noted, labelled := trash[0], trash[1]
	if _, err := Of(st).AddNote(t.Context(), m.ID, noted, "an old note"); err != nil {
		t.Fatal(err)
	}
	l, err := Of(st).CreateLabel(t.Context(), m.ID, "old", "#ff8800")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, []string{labelled}, LabelChange{Add: []string{l.ID}}); err != nil {
		t.Fatal(err)
	}
	// An item whose page is being fetched, trashed (the newest: the
	// request does not reach it either).
	fetching, err := Of(st).QueueFetch(t.Context(), m.ID, NewItem{URL: "https://example.com/fetching"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{fetching.ID}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	urlOf := map[string]string{}
	for _, id := range []string{noted, labelled} {
		it, err := Of(st).SavedItem(t.Context(), m.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		urlOf[id] = it.OriginalURL
	}
	worker := Of(st).state().Indexer
	worker.Hold() // the background part waits: both items stay stored, hidden
	release := sync.OnceFunc(worker.Release)
	defer release()
	if got, err := Of(st).EmptyTrash(t.Context(), m.ID); err != nil || got != n+1 {
		t.Fatalf("emptyTrash = %d, %v; want %d", got, err, n+1)
	}

	// Its fetch ends: nothing is saved (neither the old item nor a new one).
	if _, err := Of(st).FinishFetch(t.Context(), m.ID, fetching.ID, NewItem{URL: fetching.OriginalURL, Title: "Fetched", HTML: "<p>x</p>", Text: "x"}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the fetch of an item being deleted ends: %v, want not found", err)
	}
	saved, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: urlOf[noted], Title: "Saved again"})
	if err != nil || !created || saved.ID == noted || saved.Status != StatusActive {
		t.Fatalf("saving again an item being deleted: id %s (old %s), created %v, status %s, %v; want a new item in the inbox", saved.ID, noted, created, saved.Status, err)
	}
	j, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "y.zip", Staged: "/tmp/y", Total: 1})
	if err != nil {
		t.Fatal(err)
	}
	entry := ImportItem{URL: urlOf[labelled], Title: "Imported again", Highlights: []ImportHighlight{{Note: "an imported note"}}}
	if _, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{{Pos: 1, Item: &entry}}, nil, 0); err != nil {
		t.Fatal(err)
	}
	imported, err := Of(st).ImportedItemID(t.Context(), m.ID, &entry)
	if err != nil || imported == labelled {
		t.Fatalf("importing again an item being deleted: id %s (old %s), %v; want a new item", imported, labelled, err)
	}
	clientSees := func(when string) {
		t.Helper()
		if got := trashPage(t, st, m.ID, StatusActive, ""); !slices.Equal(got, []string{imported, saved.ID}) {
			t.Errorf("%s: the inbox lists %v, want the two new items %v", when, got, []string{imported, saved.ID})
		}
		for id, want := range map[string]string{saved.ID: "", imported: "an imported note"} {
			it, err := Of(st).SavedItem(t.Context(), m.ID, id)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			hls, err := Of(st).ItemHighlights(t.Context(), m.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			var notes []string
			for _, h := range hls {
				notes = append(notes, h.Note)
			}
			if len(it.LabelIDs) != 0 || want == "" && len(hls) != 0 || want != "" && !slices.Equal(notes, []string{want}) {
				t.Errorf("%s: item %s has labels %v and notes %q; want no labels and %q", when, id, it.LabelIDs, notes, want)
			}
		}
		if got := highlightsListed(t, st, m.ID); got != 1 {
			t.Errorf("%s: %d highlights listed, want the imported note only", when, got)
		}
	}
	clientSees("while the trash is emptied")

	release()
	waitEmptied(t, st, m.ID)
	for _, id := range []string{noted, labelled, fetching.ID} {
		if got := statusOf(t, st, m.ID, id); got != "gone" {
			t.Errorf("the old item %s is %s once the trash is emptied, want gone", id, got)
		}
	}
	clientSees("once the trash is emptied")
	again, created, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: urlOf[noted], Title: "Saved a third time"})
	if err != nil || created || again.ID != saved.ID {
		t.Errorf("the URL saved again after the emptying: id %s, created %v, %v; want the new item %s", again.ID, created, err, saved.ID)
	}
	if id, err := Of(st).ImportedItemID(t.Context(), m.ID, &entry); err != nil || id != imported {
		t.Errorf("the imported URL after the emptying finds %s, %v; want the new item %s", id, err, imported)
	}
}

// A page of the trash (or of every status) passes over at most
// maxHiddenPassed items a pending emptying hides, then ends short with
// the place it reached: a client paging on (NextAfter) gets every item it
// may see once and in order, however many the emptying still holds; and
// so do pages of highlights.
func TestTrashPageWhileEmptyingEndsShortAndPagesOn(t *testing.T) {
	o := testOptions()
	o.maxHiddenPassed = 300
	o.forcePlan = planOrdered // a type: filter walks the type's ordered keys (orderedPage)
	st, m := withAlice(t, openTest(t, o))
	const n = 3000
	fillTrash(t, st, m.ID, n)
	// Notes on more items than a page passes over, which the request
	// does not reach (it deletes the oldest first).
	newest, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusDeleted}, PageRequest{Field: SortCreatedAt, Desc: true, First: 400})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range newest.Items {
		if _, err := Of(st).AddNote(t.Context(), m.ID, it.ID, "hidden soon"); err != nil {
			t.Fatal(err)
		}
	}
	waitIndexed(t, st, m.ID)
	worker := Of(st).state().Indexer
	worker.Hold()
	release := sync.OnceFunc(worker.Release)
	defer release()
	if got, err := Of(st).EmptyTrash(t.Context(), m.ID); err != nil || got != n {
		t.Fatalf("emptyTrash = %d, %v; want %d", got, err, n)
	}
	// Items trashed after the answer among those being deleted (saved
	// at dates between theirs), and one in the inbox, each with a note.
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	j, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "y.zip", Staged: "/tmp/y", Total: 4})
	if err != nil {
		t.Fatal(err)
	}
	var entries []ImportEntry
	for i, minute := range []int{2900, 2100, 1500, 1200} {
		status := StatusDeleted
		if i == 3 {
			status = StatusActive
		}
		entries = append(entries, ImportEntry{Pos: i + 1, Item: &ImportItem{URL: fmt.Sprintf("https://example.com/late/%d", i),
			Title: "Late", CreatedAt: base.Add(time.Duration(minute)*time.Minute + time.Second), Status: status,
			Highlights: []ImportHighlight{{Note: fmt.Sprintf("late %d", i)}}}})
	}
	if _, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, entries, nil, 0); err != nil {
		t.Fatal(err)
	}
	var late []string
	for _, e := range entries {
		id, err := Of(st).ImportedItemID(t.Context(), m.ID, e.Item)
		if err != nil {
			t.Fatal(err)
		}
		late = append(late, id)
	}

	for _, c := range []struct {
		status, typ string
		want        []string
	}{
		{StatusDeleted, "", late[:3]},
		{StatusAll, "", late},
		{StatusDeleted, TypeArticle, late[:3]},
		{StatusAll, TypeArticle, late},
	} {
		var got []string
		pages := 0
		for p := (PageRequest{Field: SortCreatedAt, Desc: true, First: 2}); ; pages++ {
			page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: c.status, Type: c.typ}, p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, pageIDs(page)...)
			if p.After = page.NextAfter(); p.After == "" || pages > 100 {
				break
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("status %s, type %q: paging on lists %v, want %v", c.status, c.typ, got, c.want)
		}
		// 2,000 hidden items, 300 a page at most: at least 7 pages.
		if pages < 2000/300 {
			t.Errorf("status %s, type %q: %d pages, want the walk cut short every %d hidden items", c.status, c.typ, pages+1, o.maxHiddenPassed)
		}
	}

	var notes []string
	pages := 0
	for p := (PageRequest{Field: SortCreatedAt, Desc: true, First: 10}); ; pages++ {
		page, err := Of(st).HighlightsPage(t.Context(), m.ID, ItemFilter{}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range page.Highlights {
			notes = append(notes, h.Note)
		}
		if p.After = page.NextAfter(); p.After == "" || pages > 100 {
			break
		}
	}
	if want := []string{"late 0", "late 1", "late 2", "late 3"}; !slices.Equal(notes, want) || pages == 0 {
		t.Errorf("paging on the highlights lists %q in %d pages, want %q in more than one (400 hidden)", notes, pages+1, want)
	}
	release()
	waitEmptied(t, st, m.ID)
}

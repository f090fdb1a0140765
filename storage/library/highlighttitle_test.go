package library

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// titlePage is what a client sees of one page of highlights sorted by
// their item's title: the highlights, their cursors, whether another
// page follows and where it starts.
type titlePage struct {
	IDs, Cursors []string
	HasNext      bool
	Next         string
}

// titlePages pages through the member's highlights sorted by title as a
// client does (after: NextAfter of each page), first a page, along the
// title keys or, byStatus, the status indexes (the walk before them).
func titlePages(t *testing.T, st *storage.Store, memberID string, f ItemFilter, desc bool, first int, byStatus bool) []titlePage {
	t.Helper()
	var out []titlePage
	p := PageRequest{Field: SortTitle, Desc: desc, First: first}
	for {
		page, err := Of(st).highlightsPage(t.Context(), memberID, f, p, byStatus)
		if err != nil {
			t.Fatalf("desc %v, first %d, after %q: %v", desc, first, p.After, err)
		}
		tp := titlePage{Cursors: page.Cursors, HasNext: page.HasNext, Next: page.NextAfter()}
		for _, h := range page.Highlights {
			tp.IDs = append(tp.IDs, h.ID)
		}
		if len(tp.IDs) > first {
			t.Fatalf("a page of %d highlights, %d asked", len(tp.IDs), first)
		}
		out = append(out, tp)
		if p.After = tp.Next; p.After == "" {
			return out
		}
		if len(out) > 10000 {
			t.Fatal("the pages never end")
		}
	}
}

// listed is the highlights of pages, in their order.
func listed(pages []titlePage) []string {
	var ids []string
	for _, p := range pages {
		ids = append(ids, p.IDs...)
	}
	return ids
}

// highlightsByTitle is the member's highlights a client may see, in the
// order of their item's title (case aside, as titleSortKey), then of the
// item's id, then of their own id: from the highlights' export and the
// items, not from a page.
func highlightsByTitle(t *testing.T, st *storage.Store, memberID string, desc bool) []string {
	t.Helper()
	type hl struct {
		title     string
		item, id  uint64
		highlight string
	}
	var all []hl
	items := map[string]*SavedItem{}
	if err := Of(st).ForEachHighlight(t.Context(), memberID, func(h *Highlight) error {
		it, ok := items[h.SavedItemID]
		if !ok {
			var err error
			if it, err = Of(st).SavedItem(t.Context(), memberID, h.SavedItemID); err != nil {
				return err
			}
			items[h.SavedItemID] = it
		}
		all = append(all, hl{titleSortKey(it.Title), idBytes(it.ID), idBytes(h.ID), h.ID})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(all, func(a, b hl) int {
		c := strings.Compare(a.title, b.title)
		if c == 0 {
			c = cmpUint(a.item, b.item)
		}
		if c == 0 {
			c = cmpUint(a.id, b.id)
		}
		if desc {
			c = -c
		}
		return c
	})
	ids := make([]string, len(all))
	for i, h := range all {
		ids[i] = h.highlight
	}
	return ids
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkTitlePages fails unless every page of the member's highlights
// sorted by title, asc and desc, at several page sizes, is the page the
// walk along the status indexes gives (the same highlights, cursors and
// next page), and the pages list each highlight once, in the order of
// their item's title; an id as the cursor pages on the same.
func checkTitlePages(t *testing.T, st *storage.Store, memberID, when string) {
	t.Helper()
	for _, desc := range []bool{false, true} {
		want := highlightsByTitle(t, st, memberID, desc)
		for _, first := range []int{1, 2, 3, 7, 100} {
			got := titlePages(t, st, memberID, ItemFilter{}, desc, first, false)
			before := titlePages(t, st, memberID, ItemFilter{}, desc, first, true)
			if !reflect.DeepEqual(got, before) {
				t.Fatalf("%s: desc %v, first %d: pages\n%+v\nwant those of the status indexes\n%+v", when, desc, first, got, before)
			}
			if ids := listed(got); !slices.Equal(ids, want) {
				t.Fatalf("%s: desc %v, first %d: the pages list %v, want %v", when, desc, first, ids, want)
			}
		}
		for i := 0; i < len(want); i += 3 {
			p := PageRequest{Field: SortTitle, Desc: desc, First: 4, After: want[i]}
			got, err := Of(st).highlightsPage(t.Context(), memberID, ItemFilter{}, p, false)
			if err != nil {
				t.Fatal(err)
			}
			before, err := Of(st).highlightsPage(t.Context(), memberID, ItemFilter{}, p, true)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, before) {
				t.Fatalf("%s: desc %v, after the id %s: %+v, want %+v", when, desc, want[i], got, before)
			}
			if ids := highlightIDs(got); !slices.Equal(ids, want[i+1:min(i+5, len(want))]) {
				t.Fatalf("%s: desc %v, after the id %s: %v, want %v", when, desc, want[i], ids, want[i+1:min(i+5, len(want))])
			}
		}
	}
	checkFilterCounts(t, st, memberID) // and the ordered keys, the title keys among them
}

func highlightIDs(p *HighlightPage) []string {
	var ids []string
	for _, h := range p.Highlights {
		ids = append(ids, h.ID)
	}
	return ids
}

// addHighlight adds a highlight to the member's item id.
func addHighlight(t *testing.T, st *storage.Store, memberID, id string) string {
	t.Helper()
	h, err := Of(st).CreateHighlight(t.Context(), memberID, id, []HighlightSegment{{XPath: "/p[1]", Text: "passage"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	return h.ID
}

// titledItems saves one item for each title (in the inbox), and returns
// their ids in that order.
func titledItems(t *testing.T, st *storage.Store, memberID, name string, titles []string) []string {
	t.Helper()
	var ids []string
	for i, title := range titles {
		it, _, err := Of(st).SaveItem(t.Context(), memberID, NewItem{URL: fmt.Sprintf("https://%s.example/%d", name, i), Title: title, Text: "text"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	return ids
}

// A page of highlights sorted by their item's title walks the title keys
// of the items with highlights: a client sees the pages it saw when they
// walked every item's title index, across page boundaries, asc and desc,
// while titles change, items move between the inbox, the archive and the
// trash, and highlights come and go.
func TestHighlightsByTitlePagesAsBefore(t *testing.T) {
	st, m := openAlice(t)
	long := strings.Repeat("Ä long title ", 12) // past the 128 bytes of the title's sort key
	titles := []string{"Same", "same", " SAME ", "apple", "Zebra", long + "one", long + "two", "Écoles", "m", "", "Middle"}
	ids := titledItems(t, st, m.ID, "h", titles)
	// Items without highlights between them, in the title order.
	var plain []string
	for i := 0; i < 60; i++ {
		plain = append(plain, fmt.Sprintf("m%02d", i), fmt.Sprintf("same %02d", i))
	}
	titledItems(t, st, m.ID, "p", plain)
	for i, id := range ids {
		for j := 0; j <= i%3; j++ {
			addHighlight(t, st, m.ID, id)
		}
	}
	if _, err := Of(st).AddNote(t.Context(), m.ID, ids[4], "a note on the whole"); err != nil {
		t.Fatal(err)
	}
	checkTitlePages(t, st, m.ID, "saved")

	for i, title := range map[int]string{0: "zz renamed", 3: "Same", 7: "aardvark"} {
		if _, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, ids[i], ItemMetadata{Title: &title}); err != nil {
			t.Fatal(err)
		}
	}
	checkTitlePages(t, st, m.ID, "renamed")

	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{ids[1], ids[5]}, StatusArchived); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{ids[2], ids[6]}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	checkTitlePages(t, st, m.ID, "archived and trashed")
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{ids[2], ids[5]}, StatusActive); err != nil {
		t.Fatal(err)
	}
	checkTitlePages(t, st, m.ID, "restored")

	// An item without highlights gets one; one loses all of its own,
	// another one of several.
	addHighlight(t, st, m.ID, ids[8])
	hs, err := Of(st).ItemHighlights(t.Context(), m.ID, ids[9])
	if err != nil {
		t.Fatal(err)
	}
	if err := Of(st).DeleteHighlights(t.Context(), m.ID, []string{hs[0].ID}); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for _, id := range []string{ids[3], ids[10]} {
		hs, err := Of(st).ItemHighlights(t.Context(), m.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			gone = append(gone, h.ID)
		}
	}
	if err := Of(st).DeleteHighlights(t.Context(), m.ID, gone); err != nil {
		t.Fatal(err)
	}
	checkTitlePages(t, st, m.ID, "highlights added and deleted")

	// Deleted for good with its highlights; an imported item with its own.
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{ids[6]}); err != nil {
		t.Fatal(err)
	}
	j, err := Of(st).CreateImportJob(t.Context(), &ImportJob{MemberID: m.ID, Format: "POCKET", FileName: "h.zip", Staged: "/tmp/h", Total: 1})
	if err != nil {
		t.Fatal(err)
	}
	entry := ImportEntry{Pos: 1, Item: &ImportItem{URL: "https://imported.example/", Title: "same", Status: StatusArchived,
		Highlights: []ImportHighlight{{Segments: []HighlightSegment{{XPath: "/p[1]", Text: "one"}}}, {Note: "two"}}}}
	if _, err := Of(st).ImportItems(t.Context(), m.ID, j.ID, []ImportEntry{entry}, nil, 0); err != nil {
		t.Fatal(err)
	}
	checkTitlePages(t, st, m.ID, "deleted for good, imported")
}

// While an emptying of the trash is pending, a page sorted by title passes
// over at most maxHiddenPassed of the items it hides, each with all its
// highlights, and then ends short with a cursor past them, as the other
// orders do: paging on lists every highlight a client may see once, in
// order, those of items trashed after the emptying's answer included.
func TestHighlightsByTitleWhileEmptying(t *testing.T) {
	o := testOptions()
	o.maxHiddenPassed = 30
	st, m := withAlice(t, openTest(t, o))
	const n = 3000
	fillTrash(t, st, m.ID, n)
	// Highlights on more items than a page passes over, which the
	// request does not reach (it deletes the oldest first).
	newest, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: StatusDeleted}, PageRequest{Field: SortCreatedAt, Desc: true, First: 400})
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range newest.Items {
		addHighlight(t, st, m.ID, it.ID)
		if i%2 == 0 {
			addHighlight(t, st, m.ID, it.ID)
		}
	}
	// Items the client sees, between the hidden ones in the title order.
	kept := titledItems(t, st, m.ID, "k", []string{"Trashed 2650 kept", "Trashed 2999 kept", "A first", "Z last", "Trashed 2800 kept"})
	for _, id := range kept {
		addHighlight(t, st, m.ID, id)
	}
	waitIndexed(t, st, m.ID)
	worker := Of(st).state().Indexer
	worker.Hold()
	release := sync.OnceFunc(worker.Release)
	defer release()
	if got, err := Of(st).EmptyTrash(t.Context(), m.ID); err != nil || got != n {
		t.Fatalf("emptyTrash = %d, %v; want %d", got, err, n)
	}
	// Trashed after the answer: listed still; a highlight added.
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{kept[4]}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	addHighlight(t, st, m.ID, kept[0])

	for _, desc := range []bool{false, true} {
		want := highlightsByTitle(t, st, m.ID, desc)
		if len(want) != len(kept)+1 {
			t.Fatalf("the export lists %d highlights, want the %d of the items kept", len(want), len(kept)+1)
		}
		for _, first := range []int{2, 10} {
			pages := titlePages(t, st, m.ID, ItemFilter{}, desc, first, false)
			if got := listed(pages); !slices.Equal(got, want) {
				t.Fatalf("desc %v, first %d: paging on lists %v, want %v", desc, first, got, want)
			}
			// 400 hidden items, 30 a page at most.
			if len(pages) < 400/30 {
				t.Errorf("desc %v, first %d: %d pages, want the walk cut short every %d hidden items", desc, first, len(pages), o.maxHiddenPassed)
			}
			// The walk of the status indexes, unbounded, lists the same.
			if got := listed(titlePages(t, st, m.ID, ItemFilter{}, desc, first, true)); !slices.Equal(got, want) {
				t.Fatalf("desc %v, first %d: the status indexes' pages list %v, want %v", desc, first, got, want)
			}
		}
		// A filter that reads the items (a saved time) sees the same.
		from := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		if got := listed(titlePages(t, st, m.ID, ItemFilter{SavedFrom: &from}, desc, 3, false)); !slices.Equal(got, want) {
			t.Fatalf("desc %v, saved since 2000: %v, want %v", desc, got, want)
		}
	}
	release()
	waitEmptied(t, st, m.ID)
	checkTitlePages(t, st, m.ID, "emptied")
}

// A store written before the title keys (index version 7) answers pages
// of highlights sorted by title as before while it lacks them, and the
// indexer writes them when the store opens; then the pages walk them, with
// the same answers.
func TestHighlightsByTitleKeysCatchUp(t *testing.T) {
	dir := t.TempDir()
	st, m := withAlice(t, openBadger(t, dir))
	ids := titledItems(t, st, m.ID, "c", []string{"b", "A", "c", "a", "B", "d"})
	titledItems(t, st, m.ID, "n", []string{"aa", "bb", "cc"}) // no highlights
	for i, id := range ids {
		for j := 0; j <= i%2; j++ {
			addHighlight(t, st, m.ID, id)
		}
	}
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, ids[:2], StatusArchived); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, st, m.ID)
	want := map[bool][]titlePage{}
	for _, desc := range []bool{false, true} {
		want[desc] = titlePages(t, st, m.ID, ItemFilter{}, desc, 2, false)
	}
	check := func(when string) {
		t.Helper()
		for _, desc := range []bool{false, true} {
			if got := titlePages(t, st, m.ID, ItemFilter{}, desc, 2, false); !reflect.DeepEqual(got, want[desc]) {
				t.Fatalf("%s: desc %v: %+v, want %+v", when, desc, got, want[desc])
			}
		}
	}
	// As a store of version 7 holds it.
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		keys, err := tx.Suffixes(highlightedTitlePrefix(m.ID))
		if err != nil {
			return err
		}
		if len(keys) != len(ids) {
			return fmt.Errorf("%d title keys, want one for each of the %d items with highlights", len(keys), len(ids))
		}
		for _, k := range keys {
			if err := tx.Delete(append(highlightedTitlePrefix(m.ID), k...)); err != nil {
				return err
			}
		}
		return tx.Put(textReadyKey(m.ID), []byte{7}, 0)
	}); err != nil {
		t.Fatal(err)
	}
	check("version 7")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openBadger(t, dir)
	defer st.Close()
	waitIndexed(t, st, m.ID)
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		v, err := searchVersion(tx, m.ID)
		if err == nil && v != searchIndexVersion {
			err = fmt.Errorf("version %d after the catch-up", v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	checkFilterCounts(t, st, m.ID) // the title keys written
	check("after the catch-up")
	checkTitlePages(t, st, m.ID, "after the catch-up")
}

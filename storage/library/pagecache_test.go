package library

import (
	"fmt"
	"reflect"
	"testing"
)

// A word search's page answered from pageCache is the page the same search
// reads without it (a label filter that rules out nothing keeps a page out
// of the cache), through each kind of write of an item on the page, off it,
// or new: its fields, its place, its text, its removal.
func TestWordPagesCachedExact(t *testing.T) {
	o := testOptions()
	o.candidateFloor = 1 // the common word's pages walk the inbox with the index's filter
	st, m := withAlice(t, openTest(t, o))
	var ids []string // oldest first
	for i := range 120 {
		text := fmt.Sprintf("plain words %d", i)
		switch {
		case i%6 == 0:
			text += " a cobaltite vein"
		case i%6 == 1:
			text += " cobalt and baltite" // each trigram, not the word
		case i == 50:
			text += " zanzibarite"
		}
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://rocks.example/%d", i), Title: "Rock", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	waitIndexed(t, st, m.ID)
	label, err := Of(st).CreateLabel(t.Context(), m.ID, "rocks", "#000000")
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, word := range []string{"cobaltite", "zanzibarite", "xylocarpqz"} {
			for _, status := range []string{"", StatusAll} {
				for _, after := range []string{"", ids[100]} {
					f := ItemFilter{Text: word, Status: status}
					p := PageRequest{Field: SortCreatedAt, Desc: true, First: 5, After: after}
					uncached := f
					uncached.LabelsNot = []string{"no such label"}
					want, err := Of(st).SavedItemsPage(t.Context(), m.ID, uncached, p)
					if err != nil {
						t.Fatal(err)
					}
					for range 2 {
						got, err := Of(st).SavedItemsPage(t.Context(), m.ID, f, p)
						if err != nil {
							t.Fatal(err)
						}
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("%s, %q in %q after %q: %v, want %v", when, word, status, after, pageIDs(got), pageIDs(want))
						}
					}
					statuses := []string{StatusActive}
					if status == StatusAll {
						statuses = []string{StatusActive, StatusArchived, StatusDeleted}
					}
					if l := newPageLookup(st, m.ID, statuses, f, p); pageCache.Of(st).Get(l.key) == nil {
						t.Fatalf("%s, %q in %q after %q: the page is not cached", when, word, status, after)
					}
				}
			}
		}
	}
	check("saved")
	newest := ids[len(ids)-1-5] // on the first page of the common word
	if _, err := Of(st).UpdateReadingProgress(t.Context(), m.ID, newest, 42); err != nil {
		t.Fatal(err)
	}
	check("reading progress")
	if _, err := Of(st).SetItemsRead(t.Context(), m.ID, []string{newest}, true); err != nil {
		t.Fatal(err)
	}
	check("read")
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, []string{newest}, LabelChange{Add: []string{label.ID}}); err != nil {
		t.Fatal(err)
	}
	check("labelled")
	if _, err := Of(st).CreateHighlight(t.Context(), m.ID, newest, []HighlightSegment{{XPath: "/p", Text: "x"}}, ""); err != nil {
		t.Fatal(err)
	}
	check("highlighted")
	title := "Cobaltite"
	if _, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, ids[len(ids)-2], ItemMetadata{Title: &title}); err != nil {
		t.Fatal(err)
	}
	check("a title gains the word")
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{ids[len(ids)-2], ids[50]}, StatusArchived); err != nil {
		t.Fatal(err)
	}
	check("archived")
	if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://rocks.example/new", Title: "Rock", Text: "new cobaltite and zanzibarite"}); err != nil {
		t.Fatal(err)
	}
	check("saved again")
	waitIndexed(t, st, m.ID)
	check("indexed")
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{newest}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	check("trashed")
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{newest}); err != nil {
		t.Fatal(err)
	}
	check("deleted")
}

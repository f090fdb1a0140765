package library

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// wordNodes is this package's PostgreSQL server for two nodes of one site
// (stopped by TestMain through storagetest.Main).
var wordNodes = storagetest.NewPostgres(15461)

// wordSearch returns the ids of the first page of a search for word (the
// inbox, newest first), failing the test on an error.
func wordSearch(t *testing.T, st *storage.Store, memberID, word string) []string {
	t.Helper()
	page, err := Of(st).SavedItemsPage(t.Context(), memberID, ItemFilter{Text: word}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	return pageIDs(page)
}

// wordCached reports whether st's word cache holds a result for word.
func wordCached(st *storage.Store, memberID, word string) bool {
	return wordCache.Of(st).Get(memberID+"\x00"+word) != nil
}

// wordPageCached reports whether st's page cache holds the page
// wordSearch asks for word.
func wordPageCached(st *storage.Store, memberID, word string) bool {
	l := newPageLookup(st, memberID, []string{StatusActive}, ItemFilter{Text: word}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	return pageCache.Of(st).Get(l.key) != nil
}

// saveWordItems saves four items: two whose text holds "zanzibarite", one
// that holds each of its trigrams but not the word (a candidate of the
// index that its verification turns down), one without it. It returns
// their ids, oldest first.
func saveWordItems(t *testing.T, st *storage.Store, memberID string) []string {
	t.Helper()
	var ids []string
	for i, text := range []string{"a zanzibarite crystal", "the zanziba barite mine", "plain granite", "more ZANZIBARITE here"} {
		it, _, err := Of(st).SaveItem(t.Context(), memberID, NewItem{URL: "https://rocks.example/" + string(rune('a'+i)), Title: "Rock", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	return ids
}

// A word search answered from the word cache answers what the index and
// the texts give: a change of an item's text (queued, then indexed), of its
// status or its removal shows in the next search, however often the same
// search ran before; whether the page reads the index's candidates or
// (candidateFloor lowered: more candidates than the page reads one by one)
// walks the inbox verifying each item.
func TestWordSearchCachedExact(t *testing.T) {
	for _, floor := range []int{defaultOptions().candidateFloor, 1} {
		t.Run(fmt.Sprint("floor ", floor), func(t *testing.T) {
			o := testOptions()
			o.candidateFloor = floor
			testWordSearchCachedExact(t, o)
		})
	}
}

func testWordSearchCachedExact(t *testing.T, o options) {
	st, m := withAlice(t, openTest(t, o))
	ids := saveWordItems(t, st, m.ID)
	waitIndexed(t, st, m.ID)
	check := func(when string, want ...string) {
		t.Helper()
		for range 3 {
			if got := wordSearch(t, st, m.ID, "zanzibarite"); !slices.Equal(got, want) {
				t.Fatalf("%s: %v, want %v", when, got, want)
			}
		}
		if !wordCached(st, m.ID, "zanzibarite") {
			t.Fatalf("%s: the result is not cached", when)
		}
	}
	check("indexed", ids[3], ids[0])
	// The candidate turned down gets the word in its title: queued, then
	// indexed.
	title := "Zanzibarite"
	if _, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, ids[1], ItemMetadata{Title: &title}); err != nil {
		t.Fatal(err)
	}
	check("title changed", ids[3], ids[1], ids[0])
	waitIndexed(t, st, m.ID)
	check("title indexed", ids[3], ids[1], ids[0])
	// And loses it again.
	title = "Rock"
	if _, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, ids[1], ItemMetadata{Title: &title}); err != nil {
		t.Fatal(err)
	}
	check("title changed back", ids[3], ids[0])
	waitIndexed(t, st, m.ID)
	check("title indexed again", ids[3], ids[0])
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{ids[3]}, StatusArchived); err != nil {
		t.Fatal(err)
	}
	check("archived", ids[0])
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{ids[0]}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{ids[0]}); err != nil {
		t.Fatal(err)
	}
	check("deleted")
}

// Two nodes of one site: a word search cached on each node (its result
// and its page) answers, on either, what the other node's writes left,
// from the next search on.
func TestClusterWordSearchExactOnEveryNode(t *testing.T) {
	a, b := wordNodes.TwoNodesPrepared(t, func(st *storage.Store) { setOptions(st, testOptions()) })
	alice, err := members.Of(a).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	m := alice.ID
	ids := saveWordItems(t, a, m)
	waitIndexed(t, a, m)
	check := func(when string, want ...string) {
		t.Helper()
		// Until both nodes hold the result (a node adds none while its
		// listener is not up, or after another node's commit dropped
		// cached records since the search began), then once more.
		storagetest.Eventually(t, when+": the result cached on both nodes", func() bool {
			for _, st := range []*storage.Store{a, b} {
				if got := wordSearch(t, st, m, "zanzibarite"); !slices.Equal(got, want) {
					t.Fatalf("%s: %v, want %v", when, got, want)
				}
			}
			return wordCached(a, m, "zanzibarite") && wordCached(b, m, "zanzibarite") &&
				wordPageCached(a, m, "zanzibarite") && wordPageCached(b, m, "zanzibarite")
		})
		for _, st := range []*storage.Store{a, b} {
			if got := wordSearch(t, st, m, "zanzibarite"); !slices.Equal(got, want) {
				t.Fatalf("%s, cached: %v, want %v", when, got, want)
			}
		}
	}
	check("indexed", ids[3], ids[0])
	title := "Zanzibarite"
	if _, err := Of(b).UpdateItemMetadata(t.Context(), m, ids[1], ItemMetadata{Title: &title}); err != nil {
		t.Fatal(err)
	}
	check("title changed on B", ids[3], ids[1], ids[0])
	waitIndexed(t, a, m)
	check("indexed", ids[3], ids[1], ids[0])
	title = "Rock"
	if _, err := Of(a).UpdateItemMetadata(t.Context(), m, ids[3], ItemMetadata{Title: &title}); err != nil {
		t.Fatal(err)
	}
	check("title changed on A (the word stays in the text)", ids[3], ids[1], ids[0])
	if _, err := Of(b).SetItemsStatus(t.Context(), m, []string{ids[0]}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := Of(b).PermanentlyDeleteItems(t.Context(), m, []string{ids[0]}); err != nil {
		t.Fatal(err)
	}
	check("deleted on B", ids[3], ids[1])
}

// labelNames are the names of the member's labels on st, in their order.
func labelNames(t *testing.T, st *storage.Store, memberID string) []string {
	t.Helper()
	ls, err := Of(st).Labels(t.Context(), memberID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

// queryNames are the names and queries of the member's saved queries on
// st, in their order.
func queryNames(t *testing.T, st *storage.Store, memberID string) []string {
	t.Helper()
	qs, err := Of(st).SavedQueries(t.Context(), memberID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, q := range qs {
		out = append(out, q.Name+"="+q.Query)
	}
	return out
}

// The labels and saved queries a node read (and cached) are what every
// change on any node left, from the next read on: creations, renames,
// reorders and deletions, through the lists and through label: searches.
func TestClusterListsExactOnEveryNode(t *testing.T) {
	a, b := wordNodes.TwoNodesPrepared(t, func(st *storage.Store) { setOptions(st, testOptions()) })
	alice, err := members.Of(a).CreateMember(t.Context(), "alice", "", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	m := alice.ID
	it, _, err := Of(a).SaveItem(t.Context(), m, NewItem{URL: "https://rocks.example/a", Title: "Rock", Text: "granite"})
	if err != nil {
		t.Fatal(err)
	}
	lists := func(when string, labels, queries []string) {
		t.Helper()
		for _, st := range []*storage.Store{a, b, a, b} {
			if got := labelNames(t, st, m); !slices.Equal(got, labels) {
				t.Fatalf("%s: labels %v, want %v", when, got, labels)
			}
			if got := queryNames(t, st, m); !slices.Equal(got, queries) {
				t.Fatalf("%s: saved queries %v, want %v", when, got, queries)
			}
		}
	}
	search := func(when, label string, want ...string) {
		t.Helper()
		for _, st := range []*storage.Store{a, b} {
			page, err := Of(st).SavedItemsPage(t.Context(), m, ItemFilter{LabelsAll: [][]string{{label}}}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
			if err != nil {
				t.Fatal(err)
			}
			if got := pageIDs(page); !slices.Equal(got, want) {
				t.Fatalf("%s: label:%s gives %v, want %v", when, label, got, want)
			}
		}
	}
	lists("none", nil, nil)
	l1, err := Of(a).CreateLabel(t.Context(), m, "gems", "#ff0000")
	if err != nil {
		t.Fatal(err)
	}
	lists("created on A", []string{"gems"}, nil)
	l2, err := Of(b).CreateLabel(t.Context(), m, "rocks", "#00ff00")
	if err != nil {
		t.Fatal(err)
	}
	lists("created on B", []string{"gems", "rocks"}, nil)
	if _, err := Of(a).SetItemLabels(t.Context(), m, []string{it.ID}, LabelChange{Set: &[]string{l1.ID}}); err != nil {
		t.Fatal(err)
	}
	search("labelled", "gems", it.ID)
	if _, err := Of(b).UpdateLabel(t.Context(), m, l1.ID, "jewels", "#ff0000"); err != nil {
		t.Fatal(err)
	}
	lists("renamed on B", []string{"jewels", "rocks"}, nil)
	search("renamed on B", "jewels", it.ID)
	search("renamed on B", "gems")
	if _, err := Of(a).ReorderLabels(t.Context(), m, []string{l2.ID}); err != nil {
		t.Fatal(err)
	}
	lists("reordered on A", []string{"rocks", "jewels"}, nil)
	q1, err := Of(b).CreateSavedQuery(t.Context(), m, "Shiny", "label:jewels")
	if err != nil {
		t.Fatal(err)
	}
	lists("query created on B", []string{"rocks", "jewels"}, []string{"Shiny=label:jewels"})
	q2, err := Of(a).CreateSavedQuery(t.Context(), m, "Dull", "label:rocks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(b).ReorderSavedQueries(t.Context(), m, []string{q2.ID}); err != nil {
		t.Fatal(err)
	}
	lists("queries reordered on B", []string{"rocks", "jewels"}, []string{"Dull=label:rocks", "Shiny=label:jewels"})
	if _, err := Of(a).UpdateSavedQuery(t.Context(), m, q1.ID, "Shiny", "label:rocks"); err != nil {
		t.Fatal(err)
	}
	lists("query changed on A", []string{"rocks", "jewels"}, []string{"Dull=label:rocks", "Shiny=label:rocks"})
	if err := Of(b).DeleteSavedQuery(t.Context(), m, q2.ID); err != nil {
		t.Fatal(err)
	}
	lists("query deleted on B", []string{"rocks", "jewels"}, []string{"Shiny=label:rocks"})
	if err := Of(b).DeleteLabel(t.Context(), m, l1.ID); err != nil {
		t.Fatal(err)
	}
	lists("deleted on B", []string{"rocks"}, []string{"Shiny=label:rocks"})
	search("deleted on B", "jewels")
}

// A common word, in a share of the items small enough for the index to
// answer with a filter of its candidates and too many to read one by one:
// the word cache keeps what the walk learnt of each item (its text read
// and holding the word or not, or passed over by the filter), and every
// page, however often the same search runs, is what the texts give —
// through a change of text, of status and a removal.
func TestCommonWordSearchCachedExact(t *testing.T) {
	o := testOptions()
	o.candidateFloor = 1 // a page reads at most 35 candidates one by one
	st, m := withAlice(t, openTest(t, o))
	const n = 1000
	has := map[string]bool{}
	var ids []string // oldest first
	for from := 0; from < n; from += 100 {
		// The batch's ids are kept only once its transaction committed: an
		// engine may run the function again after a conflict.
		var batch []string
		err := st.Update(t.Context(), func(tx *storage.Tx) error {
			batch = batch[:0]
			for i := from; i < from+100; i++ {
				title, text := "t", fmt.Sprintf("plain words %d", i)
				switch i % 25 {
				case 0:
					title = "a Cobaltite vein"
				case 7:
					text += " cobalt and baltite and tite" // each trigram, not the word
				}
				at := storage.Now().Add(time.Duration(i-n) * time.Second)
				it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: title, CreatedAt: at, UpdatedAt: at}
				if err := writeItem(tx, itemChange{it: it, content: &ItemContent{Text: text}}); err != nil {
					return err
				}
				batch = append(batch, it.ID)
				has[it.ID] = i%25 == 0
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, batch...)
	}
	waitIndexed(t, st, m.ID)
	check := func(when string) {
		t.Helper()
		var want []string
		for i := len(ids) - 1; i >= 0; i-- {
			if has[ids[i]] {
				want = append(want, ids[i])
			}
		}
		for range 3 {
			var got []string
			after := ""
			for {
				page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "cobaltite"}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10, After: after})
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				got = append(got, pageIDs(page)...)
				if !page.HasNext {
					break
				}
				after = page.Cursors[len(page.Cursors)-1]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %d items %v, want %d %v", when, len(got), got, len(want), want)
			}
		}
		if r := wordCache.Of(st).Get(m.ID + "\x00cobaltite"); r == nil || !r.filtered || len(r.verified) == 0 {
			t.Fatalf("%s: the word cache holds %+v; want the verdicts of a filter's walk", when, r)
		}
	}
	check("indexed")
	// An item gains the word, another loses it, a third (a candidate the
	// texts turned down) gains it: queued, then indexed.
	for i, title := range map[int]string{n - 3: "now cobaltite too", n - 25: "no longer", n - 18: "cobaltite at last"} {
		if _, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, ids[i], ItemMetadata{Title: &title}); err != nil {
			t.Fatal(err)
		}
		has[ids[i]] = strings.Contains(title, "cobaltite")
	}
	waitIndexed(t, st, m.ID)
	check("titles changed")
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{ids[n-50], ids[n-75]}, StatusArchived); err != nil {
		t.Fatal(err)
	}
	has[ids[n-50]], has[ids[n-75]] = false, false
	if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{ids[n-75]}, StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{ids[n-75]}); err != nil {
		t.Fatal(err)
	}
	check("archived and deleted")
}

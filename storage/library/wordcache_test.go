package library

import (
	"fmt"
	"slices"
	"testing"

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
	for _, floor := range []int{candidateFloor, 1} {
		t.Run(fmt.Sprint("floor ", floor), func(t *testing.T) {
			defer func(n int) { candidateFloor = n }(candidateFloor)
			candidateFloor = floor
			testWordSearchCachedExact(t)
		})
	}
}

func testWordSearchCachedExact(t *testing.T) {
	st, m := openAlice(t)
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

// Two nodes of one site: a word search cached on each node answers, on
// either, what the other node's writes left, from the next search on.
func TestClusterWordSearchExactOnEveryNode(t *testing.T) {
	a, b := wordNodes.TwoNodes(t)
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
			return wordCached(a, m, "zanzibarite") && wordCached(b, m, "zanzibarite")
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

package library

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
)

// A store whose items were saved before the search index existed (no text
// records, filter keys or ready marker) answers correctly at once, and
// builds its index in the background.
func TestSearchIndexBuiltForOlderStores(t *testing.T) {
	dir := t.TempDir()
	st, m := openBadgerAlice(t, dir)
	var ids []string
	for i := 0; i < 300; i++ {
		text := fmt.Sprintf("item %d of the rye bakery", i)
		if i%100 == 7 {
			text += " Zanzibarite"
		}
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://s%d.example/%d", i%3, i), Title: fmt.Sprint("T", i), Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	waitIndexed(t, st, m.ID)
	// Remove everything the search index added, as a store of the
	// version before it holds.
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		for _, p := range [][]byte{storage.Key("u", m.ID, "gql", "tt", ""), storage.Key("u", m.ID, "gql", "tp", ""), storage.Key("u", m.ID, "gql", "td", ""),
			storage.Key("u", m.ID, "gql", "tn", ""), memberIndex(m.ID).TrigramPrefix(), siteItemsPrefix(m.ID), storage.Key("u", m.ID, "gql", "sn", ""), storage.Key("u", m.ID, "gql", "ty", ""),
			highlightedItemsPrefix(m.ID)} {
			if err := tx.DeletePrefix(p); err != nil {
				return err
			}
		}
		if err := tx.Delete(memberIndex(m.ID).MetaKey()); err != nil {
			return err
		}
		// A folded copy of a text, as versions before 4 kept.
		if err := tx.Put(textKey(m.ID, ids[5]), []byte("\x01\x02t5\x00\x04item"), 0); err != nil {
			return err
		}
		return tx.Delete(textReadyKey(m.ID))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ids[207], ids[107], ids[7]}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "zanzibarite"}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := pageIDs(page); !slices.Equal(got, want) {
		t.Fatalf("before the build: %v, want %v", got, want)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openBadger(t, dir)
	defer st.Close()
	waitIndexed(t, st, m.ID)
	checkFilterCounts(t, st, m.ID)
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		if ok, err := tx.Has(textKey(m.ID, ids[5])); err != nil || ok {
			return fmt.Errorf("the old text record is still there (%v)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var candidates []string
	err = st.View(t.Context(), func(tx *storage.Tx) error {
		var ok bool
		candidates, ok, _, err = textCandidates(tx, m.ID, []byte("zanzibarite"), maxCandidates)
		if !ok {
			return errors.New("the index does not answer")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(candidates) != 3 {
		t.Fatalf("after the build the index gives %d candidates, want 3", len(candidates))
	}
	for _, q := range []ItemFilter{{Text: "zanzibarite"}, {Text: "ZANZIBARITE", Site: "s1.example"}} {
		page, err = Of(st).SavedItemsPage(t.Context(), m.ID, q, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
		if err != nil {
			t.Fatal(err)
		}
		w := want
		if q.Site != "" {
			w = []string{ids[7]} // 7 % 3 == 1
		}
		if got := pageIDs(page); !slices.Equal(got, w) {
			t.Fatalf("%+v after the build: %v, want %v", q, got, w)
		}
	}
}

// segmentKeys counts the tg/ keys of each segment number.
func segmentKeys(t *testing.T, st *storage.Store, memberID string) map[uint32]int {
	t.Helper()
	out := map[uint32]int{}
	p := memberIndex(memberID).TrigramPrefix()
	err := st.View(t.Context(), func(tx *storage.Tx) error {
		return tx.Scan(p, nil, false, true, func(k, _ []byte) (bool, error) {
			out[binary.BigEndian.Uint32(k[len(p):])]++
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Segments merge eight of a size into one; a merge that a crash left
// recorded but unfinished is finished; no keys of merged segments remain;
// searches stay exact throughout.
func TestSearchSegmentsMerge(t *testing.T) {
	st, m := openAlice(t)
	var ids []string
	for i := 0; i < 80; i++ {
		text := fmt.Sprintf("loaf %d of rye", i)
		if i%9 == 0 {
			text += " with caraway"
		}
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "t", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
		waitIndexed(t, st, m.ID) // one segment per item
	}
	check := func(when string) {
		t.Helper()
		var meta *textindex.Meta
		if err := st.View(t.Context(), func(tx *storage.Tx) (err error) { meta, err = memberIndex(m.ID).ReadMeta(tx); return err }); err != nil {
			t.Fatal(err)
		}
		levels := map[int]int{}
		live := map[uint32]bool{}
		var docs uint32
		for _, sg := range meta.Segments {
			levels[textindex.SegmentLevel(sg.Docs)]++
			live[sg.ID] = true
			docs += sg.Docs
		}
		for l, n := range levels {
			if n >= 8 {
				t.Fatalf("%s: %d segments of level %d", when, n, l)
			}
		}
		if docs != 80 || meta.Merging != 0 || len(meta.Deleting) != 0 {
			t.Fatalf("%s: %+v", when, meta)
		}
		for seg := range segmentKeys(t, st, m.ID) {
			if !live[seg] {
				t.Fatalf("%s: keys of segment %d, not live (%+v)", when, seg, meta.Segments)
			}
		}
		page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "CARAWAY"}, PageRequest{Field: SortCreatedAt, First: 100})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := 0; i < 80; i += 9 {
			want = append(want, ids[i])
		}
		if got := pageIDs(page); !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", when, got, want)
		}
	}
	check("after 80 one-item segments")
	if n := len(segmentKeys(t, st, m.ID)); n > 10 {
		t.Fatalf("%d segments live after merges", n)
	}
	// A merge recorded, its segment half written, then a crash: the
	// indexer finishes it.
	Of(st).state().indexPaused.Store(true)
	defer Of(st).state().indexPaused.Store(false)
	for i := 80; i < 88; i++ { // eight more one-item segments, by hand
		if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "t", Text: "plain"}); err != nil {
			t.Fatal(err)
		}
		if err := st.Update(t.Context(), func(tx *storage.Tx) error {
			_, err := memberIndex(m.ID).IndexPending(tx, itemTexts{m.ID}, 1)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var meta *textindex.Meta
	if err := st.View(t.Context(), func(tx *storage.Tx) (err error) { meta, err = memberIndex(m.ID).ReadMeta(tx); return err }); err != nil {
		t.Fatal(err)
	}
	var from []uint32
	for _, sg := range meta.Segments {
		if sg.Docs == 1 {
			from = append(from, sg.ID)
		}
	}
	if len(from) < 8 {
		t.Fatalf("%d one-item segments, want 8 or more", len(from))
	}
	if err := memberIndex(m.ID).UpdateMeta(st, func(mm *textindex.Meta) { mm.Merging, mm.MergeFrom = mm.NextSeg, from; mm.NextSeg++ }); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		return tx.Put(append(memberIndex(m.ID).SegmentPrefix(meta.NextSeg), "pla"...), []byte{1}, 0)
	}); err != nil {
		t.Fatal(err)
	}
	Of(st).state().indexPaused.Store(false)
	Of(st).textIndex().Notify(m.ID)
	for i := 0; ; i++ {
		if err := st.View(t.Context(), func(tx *storage.Tx) (err error) { meta, err = memberIndex(m.ID).ReadMeta(tx); return err }); err != nil {
			t.Fatal(err)
		}
		if meta.Merging == 0 && len(meta.Deleting) == 0 {
			break
		}
		if i > 3000 {
			t.Fatal("the interrupted merge is not finished after a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var docs uint32
	for _, sg := range meta.Segments {
		docs += sg.Docs
	}
	if docs != 88 {
		t.Fatalf("%d documents after the merge, want 88", docs)
	}
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "plain"}, PageRequest{Field: SortCreatedAt, First: 100})
	if err != nil || len(page.Items) != 8 {
		t.Fatalf("plain: %v %v", page, err)
	}
}

func waitSearchIndexForBench(b *testing.B, st *storage.Store, memberID string) {
	waitIndexed(b, st, memberID)
}

// An item with more distinct trigrams than one indexing transaction may
// hold (a book) is listed as wide and verified by every search; it does not
// stop the items queued after it, and is found like any other.
func TestSearchWideItems(t *testing.T) {
	st, m := openAlice(t)
	r := rand.New(rand.NewSource(7))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-+=!?éßσ"
	letters := []rune(alphabet)
	var b strings.Builder
	for b.Len() < 200000 {
		b.WriteRune(letters[r.Intn(len(letters))])
	}
	book := b.String() + " the needle Bookmarkwide here"
	if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/first", Title: "first", Text: "plain"}); err != nil {
		t.Fatal(err)
	}
	wideItem, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/book", Title: "A book", Text: book})
	if err != nil {
		t.Fatal(err)
	}
	var after []string
	for i := 0; i < 20; i++ {
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "after", Text: fmt.Sprintf("later item Afterward%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, it.ID)
	}
	waitIndexed(t, st, m.ID)
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		if ok, err := tx.Has(memberIndex(m.ID).WideKey(wideItem.ID)); err != nil || !ok {
			return fmt.Errorf("the book is not listed as wide (%v)", err)
		}
		if ok, _ := tx.Has(memberIndex(m.ID).DocKey(after[19])); !ok {
			return errors.New("an item after the book is not indexed")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]string{"bookmarkwide": {wideItem.ID}, "AFTERWARD07": {after[7]}, book[1000:1030]: {wideItem.ID}} {
		page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: q}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
		if err != nil {
			t.Fatal(err)
		}
		if got := pageIDs(page); !slices.Equal(got, want) {
			t.Fatalf("%.20q: %v, want %v", q, got, want)
		}
	}
}

// The build for an older store takes items in smaller batches when Badger
// finds a batch of long texts too big for one transaction.
func TestSearchIndexBuildOfLongTexts(t *testing.T) {
	dir := t.TempDir()
	st, m := openBadgerAlice(t, dir)
	long := strings.Repeat("a long text of many words, ", 4000) // 108 KB
	var ids []string
	for i := 0; i < 40; i++ {
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "t", Text: long + fmt.Sprintf(" Marker%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	waitIndexed(t, st, m.ID)
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		for _, p := range [][]byte{storage.Key("u", m.ID, "gql", "tt", ""), storage.Key("u", m.ID, "gql", "td", ""), storage.Key("u", m.ID, "gql", "tn", ""),
			memberIndex(m.ID).TrigramPrefix(), storage.Key("u", m.ID, "gql", "tw", "")} {
			if err := tx.DeletePrefix(p); err != nil {
				return err
			}
		}
		if err := tx.Delete(memberIndex(m.ID).MetaKey()); err != nil {
			return err
		}
		return tx.Delete(textReadyKey(m.ID))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openBadger(t, dir)
	defer st.Close()
	waitIndexed(t, st, m.ID)
	page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: "marker33"}, PageRequest{Field: SortCreatedAt, Desc: true, First: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := pageIDs(page); !slices.Equal(got, []string{ids[33]}) {
		t.Fatalf("marker33: %v, want %v", got, ids[33])
	}
}

// A store of index version 4 (written before the ordered filter keys,
// oy/, oh/ and ol/) or 5 (their values without the domain) answers as
// before while it lacks them, and the indexer writes them when the store
// opens (version 6); then pages in the order of createdAt walk them, with
// the same answers.
func TestSearchOrderedKeysCatchUp(t *testing.T) {
	dir := t.TempDir()
	// Pages in the order of createdAt walk the ordered keys whenever a
	// filter has them.
	o := testOptions()
	o.forcePlan = planOrdered
	st, m := withAlice(t, openBadgerWith(t, dir, o))
	rye, err := Of(st).CreateLabel(t.Context(), m.ID, "rye", "#000000")
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]*propItem{}
	var ids []string
	for i := 0; i < 120; i++ {
		in := NewItem{URL: fmt.Sprintf("https://s%d.example/%d", i%3, i), Title: fmt.Sprint("T", i), Text: "rye bread"}
		if i%4 == 1 {
			in.Type, in.URL = TypeNewsletter, ""
		}
		p := &propItem{title: in.Title, text: in.Text}
		if i%3 == 0 {
			in.LabelIDs, p.label = []string{rye.ID}, rye.Name
		}
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
		p.it = it
		all[it.ID] = p
	}
	for i, id := range ids {
		if i%5 == 0 {
			if _, err := Of(st).CreateHighlight(t.Context(), m.ID, id, []HighlightSegment{{XPath: "/p[1]", StartOffset: 0, EndOffset: 1, Text: "r"}}, ""); err != nil {
				t.Fatal(err)
			}
		}
		if i%7 == 0 {
			if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{id}, StatusArchived); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitIndexed(t, st, m.ID)
	for id := range all {
		if all[id].it, err = Of(st).SavedItem(t.Context(), m.ID, id); err != nil {
			t.Fatal(err)
		}
	}
	yes := true
	queries := []ItemFilter{
		{Status: StatusAll, Type: TypeNewsletter},
		{Status: StatusAll, Type: TypeNewsletter, HasHighlights: &yes},
		{Status: StatusArchived, Type: TypeArticle},
		{Status: StatusActive, HasHighlights: &yes, Site: "s1"},
		{Status: StatusAll, HasHighlights: &yes, Text: "RYE"},
		{Status: StatusAll, LabelsAll: [][]string{{"rye"}}, Type: TypeNewsletter},
		{Status: StatusArchived, LabelsAll: [][]string{{"rye"}}},
	}
	check := func(when string) {
		t.Helper()
		for _, f := range queries {
			for _, desc := range []bool{true, false} {
				want := bruteForce(all, f, SortCreatedAt, desc)
				if len(want) == 0 {
					t.Fatalf("%+v selects nothing", f)
				}
				if got := allPages(t, st, m.ID, f, SortCreatedAt, desc, 7); !slices.Equal(got, want) {
					t.Fatalf("%s: %+v desc %v:\n got %v\nwant %v", when, f, desc, got, want)
				}
			}
		}
	}
	check("as written")
	checkOrderedCopies(t, st, m.ID)
	// As a store of version 4 holds it (no ordered keys), then as one of
	// version 5 (ordered keys whose value is the status alone), then of
	// version 6 (the status and the domain, no copy of the record).
	for _, old := range []byte{4, 5, 6} {
		if err := st.Update(t.Context(), func(tx *storage.Tx) error {
			for _, p := range orderedKeyPrefixes(m.ID) {
				var keys, values [][]byte
				if err := tx.Scan(p, nil, false, false, func(k, v []byte) (bool, error) {
					status, domain, _ := parseOrderedValue(v)
					value := []byte{status}
					if old == 6 {
						value = append(value, domain...)
					}
					keys, values = append(keys, slices.Clone(k)), append(values, value)
					return true, nil
				}); err != nil {
					return err
				}
				for i, k := range keys {
					var err error
					if old == 4 {
						err = tx.Delete(k)
					} else {
						err = tx.Put(k, values[i], 0)
					}
					if err != nil {
						return err
					}
				}
			}
			return tx.Put(textReadyKey(m.ID), []byte{old}, 0)
		}); err != nil {
			t.Fatal(err)
		}
		if n, err := Of(st).SearchIndexBacklog(t.Context(), m.ID); err != nil || n == 0 {
			t.Fatalf("version %d: backlog %d (%v), want the build to come", old, n, err)
		}
		check(fmt.Sprint("version ", old))
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st = openBadgerWith(t, dir, o)
		waitIndexed(t, st, m.ID)
		if err := st.View(t.Context(), func(tx *storage.Tx) error {
			v, err := searchVersion(tx, m.ID)
			if err == nil && v != searchIndexVersion {
				err = fmt.Errorf("version %d after the build", v)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		checkFilterCounts(t, st, m.ID) // and the ordered keys
		checkOrderedCopies(t, st, m.ID)
		check(fmt.Sprint("after the build from version ", old))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkOrderedCopies fails when an ordered filter key of the member's
// lacks the copy of its item's record (checkOrderedKeys checks the copies
// there are).
func checkOrderedCopies(t *testing.T, st *storage.Store, memberID string) {
	t.Helper()
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		return scanOrderedKeys(tx, memberID, func(k, v []byte) (bool, error) {
			if _, _, rec := parseOrderedValue(v); rec == nil {
				return false, fmt.Errorf("the ordered filter key %q has no copy of its item's record", k)
			}
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

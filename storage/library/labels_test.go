package library

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

func makeLabels(t testing.TB, st *storage.Store, memberID, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		l, err := Of(st).CreateLabel(t.Context(), memberID, fmt.Sprintf("%s %d", prefix, i), "#336699")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
	}
	return ids
}

func itemIDs(items []*SavedItem) []string {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	return ids
}

// Many clients labelling the same items at once all succeed: a conflict
// between their transactions is retried, not reported.
func TestConcurrentLabelChangesAllSucceed(t *testing.T) {
	st, m := openSavedTest(t)

	t.Run("150 adds to one item", func(t *testing.T) {
		item := saveN(t, st, m.ID, 1)[0]
		labels := makeLabels(t, st, m.ID, "add", 150)
		var wg sync.WaitGroup
		errs := make(chan error, len(labels))
		for _, l := range labels {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := Of(st).SetItemLabels(t.Context(), m.ID, []string{item.ID}, LabelChange{Add: []string{l}}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			failed++
			t.Log(err)
		}
		if failed > 0 {
			t.Fatalf("%d of %d label adds failed", failed, len(labels))
		}
		got, err := Of(st).SavedItem(t.Context(), m.ID, item.ID)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(got.LabelIDs)
		sort.Strings(labels)
		if fmt.Sprint(got.LabelIDs) != fmt.Sprint(labels) {
			t.Fatalf("item carries %d labels, want all %d", len(got.LabelIDs), len(labels))
		}
	})

	t.Run("16 sets on overlapping items", func(t *testing.T) {
		items := itemIDs(saveN(t, st, m.ID, 60))
		labels := makeLabels(t, st, m.ID, "set", 16)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				set := []string{labels[i]}
				// Each request's items overlap its neighbours'.
				if _, err := Of(st).SetItemLabels(t.Context(), m.ID, items[i*2:i*2+30], LabelChange{Set: &set}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("setSavedItemLabels failed: %v", err)
		}
	})
}

// A label deletion that stopped after the label itself (the process was
// killed before its items were done) leaves items carrying a dead id. Those
// items can still be labelled, and lose the dead id when they are.
func TestItemsLeftWithADeletedLabelCanBeLabelled(t *testing.T) {
	st, m := openSavedTest(t)
	items := itemIDs(saveN(t, st, m.ID, 2))
	labels := makeLabels(t, st, m.ID, "l", 3)
	dead, keep, added := labels[0], labels[1], labels[2]
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, items, LabelChange{Add: []string{dead, keep}}); err != nil {
		t.Fatal(err)
	}
	// What DeleteLabel's first transaction commits, without the batches.
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		var l Label
		if err := tx.GetJSON(labelKey(m.ID, dead), &l); err != nil {
			return err
		}
		if err := tx.Delete(labelNameKey(m.ID, l.Name)); err != nil {
			return err
		}
		return tx.Delete(labelKey(m.ID, dead))
	})
	if err != nil {
		t.Fatal(err)
	}

	got, err := Of(st).SetItemLabels(t.Context(), m.ID, items[:1], LabelChange{Add: []string{added}})
	if err != nil {
		t.Fatalf("adding a label to an item with a dead label id: %v", err)
	}
	if want := []string{keep, added}; fmt.Sprint(got[0].LabelIDs) != fmt.Sprint(want) {
		t.Fatalf("labels after add = %v, want %v", got[0].LabelIDs, want)
	}
	set := []string{added}
	got, err = Of(st).SetItemLabels(t.Context(), m.ID, items[1:], LabelChange{Set: &set})
	if err != nil {
		t.Fatalf("setting the labels of an item with a dead label id: %v", err)
	}
	if fmt.Sprint(got[0].LabelIDs) != fmt.Sprint(set) {
		t.Fatalf("labels after set = %v, want %v", got[0].LabelIDs, set)
	}
	// The dead label lists no items any more.
	err = st.View(t.Context(), func(tx *storage.Tx) error {
		ids, err := labelItems(tx, m.ID, dead)
		if err == nil && len(ids) != 0 {
			t.Errorf("dead label still indexes items %v", ids)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Adding or setting an id that does not exist is still an error.
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, items, LabelChange{Add: []string{dead}}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("adding a deleted label: %v, want storage.ErrNotFound", err)
	}
	set = []string{keep, "999"}
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, items, LabelChange{Set: &set}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("setting an unknown label: %v, want storage.ErrNotFound", err)
	}
}

// Two names that differ only in case (σ, ς, Σ) or in Unicode normalisation
// (é as one code point or as e and a combining accent) are the same name:
// creating or renaming to one of them while the other exists is a conflict,
// names are stored in NFC, and label: searches find them either way.
func TestLabelNamesUniqueAcrossCaseAndNormalisation(t *testing.T) {
	st, m := openSavedTest(t)
	const cafeNFC, cafeNFD = "caf\u00e9", "cafe\u0301"
	sigma, err := Of(st).CreateLabel(t.Context(), m.ID, "σ", "#000000")
	if err != nil {
		t.Fatal(err)
	}
	other, err := Of(st).CreateLabel(t.Context(), m.ID, "other", "#000000")
	if err != nil {
		t.Fatal(err)
	}
	cafe, err := Of(st).CreateLabel(t.Context(), m.ID, cafeNFD, "#000000")
	if err != nil {
		t.Fatal(err)
	}
	if cafe.Name != cafeNFC {
		t.Errorf("name stored as %q, want NFC %q", cafe.Name, cafeNFC)
	}
	for _, name := range []string{"ς", "Σ", cafeNFC, cafeNFD, "CAFE\u0301"} {
		if _, err := Of(st).CreateLabel(t.Context(), m.ID, name, "#000000"); !errors.Is(err, storage.ErrConflict) {
			t.Errorf("create %q: %v, want storage.ErrConflict", name, err)
		}
		if _, err := Of(st).UpdateLabel(t.Context(), m.ID, other.ID, name, "#000000"); !errors.Is(err, storage.ErrConflict) {
			t.Errorf("rename to %q: %v, want storage.ErrConflict", name, err)
		}
	}
	// A label may take another form of its own name.
	if l, err := Of(st).UpdateLabel(t.Context(), m.ID, sigma.ID, "Σ", "#000000"); err != nil || l.Name != "Σ" {
		t.Fatalf("rename σ to Σ: %v %v", l, err)
	}
	labels, err := Of(st).Labels(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(labels) != 3 {
		t.Fatalf("%d labels, want 3", len(labels))
	}
	item := saveN(t, st, m.ID, 1)[0]
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, []string{item.ID}, LabelChange{Add: []string{cafe.ID, sigma.ID}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{cafeNFC, cafeNFD, "ς", "σ"} {
		p, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{LabelsAll: [][]string{{name}}}, PageRequest{Field: SortCreatedAt, First: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 1 {
			t.Errorf("label:%q found %d items, want 1", name, len(p.Items))
		}
	}
	// The freed name can be taken again after a rename and a deletion.
	if _, err := Of(st).UpdateLabel(t.Context(), m.ID, sigma.ID, "sigma", "#000000"); err != nil {
		t.Fatal(err)
	}
	if err := Of(st).DeleteLabel(t.Context(), m.ID, cafe.ID); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ς", cafeNFC} {
		if _, err := Of(st).CreateLabel(t.Context(), m.ID, name, "#000000"); err != nil {
			t.Errorf("create %q once free: %v", name, err)
		}
	}
}

// Labels written before names were folded keep their names unique.
func TestLabelNamesWrittenByEarlierVersionsStayUnique(t *testing.T) {
	st, m := openSavedTest(t)
	old := &Label{ID: testID(), Name: "Straße", Color: "#000000"}
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.Put(legacyLabelNameKey(m.ID, old.Name), []byte(old.ID), 0); err != nil {
			return err
		}
		return tx.PutJSON(labelKey(m.ID, old.ID), old, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).CreateLabel(t.Context(), m.ID, "STRASSE", "#000000"); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("create STRASSE next to Straße: %v, want storage.ErrConflict", err)
	}
	if _, err := Of(st).UpdateLabel(t.Context(), m.ID, old.ID, "Gasse", "#000000"); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).CreateLabel(t.Context(), m.ID, "straße", "#000000"); err != nil {
		t.Fatalf("create straße once renamed: %v", err)
	}
}

// Concurrent creations cannot together pass the per-member limits.
func TestConcurrentCreationsKeepTheLimits(t *testing.T) {
	st, m := openSavedTest(t)
	race := func(t *testing.T, limit, have int, create func(i int) error, count func() int) {
		t.Helper()
		const extra = 30
		var wg sync.WaitGroup
		for i := 0; i < limit-have+extra; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := create(i); err != nil && !storage.IsInvalid(err) {
					t.Errorf("create: %v", err)
				}
			}()
		}
		wg.Wait()
		if n := count(); n != limit {
			t.Fatalf("%d after concurrent creations, want the limit %d", n, limit)
		}
	}
	t.Run("labels", func(t *testing.T) {
		have := MaxLabels - 20
		makeLabels(t, st, m.ID, "before", have)
		race(t, MaxLabels, have, func(i int) error {
			_, err := Of(st).CreateLabel(t.Context(), m.ID, fmt.Sprintf("race %d", i), "#000000")
			return err
		}, func() int {
			all, err := Of(st).Labels(t.Context(), m.ID)
			if err != nil {
				t.Fatal(err)
			}
			return len(all)
		})
	})
	t.Run("saved queries", func(t *testing.T) {
		race(t, MaxSavedQueries, 0, func(i int) error {
			_, err := Of(st).CreateSavedQuery(t.Context(), m.ID, fmt.Sprintf("q %d", i), "label:x")
			return err
		}, func() int {
			all, err := Of(st).SavedQueries(t.Context(), m.ID)
			if err != nil {
				t.Fatal(err)
			}
			return len(all)
		})
	})
}

// Two labels an earlier version let stand side by side (Σ and ς: their
// lower-cased keys differ, their folded names do not) can each be recolored
// keeping its name, as Inboxt's updateLabel sends it; deleting one leaves
// the other's name taken.
func TestLabelPairsFromEarlierVersionsStayEditable(t *testing.T) {
	st, m := openSavedTest(t)
	a := &Label{ID: testID(), Name: "Σ", Color: "#000000"}
	b := &Label{ID: testID(), Name: "ς", Color: "#000000", Order: 1}
	err := st.Update(t.Context(), func(tx *storage.Tx) error {
		for _, l := range []*Label{a, b} {
			if err := tx.Put(legacyLabelNameKey(m.ID, l.Name), []byte(l.ID), 0); err != nil {
				return err
			}
			if err := tx.PutJSON(labelKey(m.ID, l.ID), l, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Label{a, b, a} {
		if _, err := Of(st).UpdateLabel(t.Context(), m.ID, l.ID, l.Name, "#ff0000"); err != nil {
			t.Fatalf("recolor %q keeping its name: %v", l.Name, err)
		}
	}
	if err := Of(st).DeleteLabel(t.Context(), m.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(st).CreateLabel(t.Context(), m.ID, "σ", "#00ff00"); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("a third label named like the remaining ς: %v, want storage.ErrConflict", err)
	}
}

// A label change that one of its items refuses (here, past the most labels
// an item holds) changes none of them, also when the items are too big to
// change in one transaction and go in parts: the parts before the refusal
// were kept, and a client got an error for a change half made.
func TestRefusedLabelChangeInPartsChangesNoItem(t *testing.T) {
	badgerOnly(t) // PostgreSQL takes any transaction size: no parts
	// A small memtable: Badger's transactions hold 15 % of one, and 400
	// items with long descriptions outgrow that.
	st, err := openWith(t.TempDir(), storage.Options{MemTableSize: 1 << 20}, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, m := withAlice(t, st)
	long := strings.Repeat("d", MaxDescriptionLen)
	var ids []string
	for i := range 400 {
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://example.com/p/%d", i), Title: "Item", Description: long, Text: "body"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	labels := makeLabels(t, st, m.ID, "l", 2)
	had, add := labels[0], labels[1]
	if _, err := Of(st).SetItemLabels(t.Context(), m.ID, ids[len(ids)-1:], LabelChange{Set: &[]string{had}}); err != nil {
		t.Fatal(err)
	}
	// add and ids of labels the member does not have (skipped, as Inboxt
	// skips them), MaxBatchIDs in all: the last item, with its label, is
	// past the limit.
	more := []string{add}
	for i := range MaxBatchIDs - 1 {
		more = append(more, strconv.Itoa(900000+i))
	}
	_, err = Of(st).SetItemLabels(t.Context(), m.ID, ids, LabelChange{Add: more, SkipUnknown: true})
	if !storage.IsInvalid(err) {
		t.Fatalf("SetItemLabels: %v, want the refusal of too many labels", err)
	}
	items, err := Of(st).SavedItems(t.Context(), m.ID, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if contains(it.LabelIDs, add) {
			t.Fatalf("item %s carries the label of the refused change: %v", it.ID, it.LabelIDs)
		}
	}
}

// A label taken back by the request that made it (DeleteUnusedLabel, after
// that request was refused) stays when another request has put it on an
// item meanwhile, with that item keeping it; a label nothing carries goes,
// and its name can be made again.
func TestAnUnusedLabelIsTakenBackAndAUsedOneStays(t *testing.T) {
	st, m := openSavedTest(t)
	ctx := t.Context()
	used, err := Of(st).CreateLabel(ctx, m.ID, "Fresh", "#336699")
	if err != nil {
		t.Fatal(err)
	}
	unused, err := Of(st).CreateLabel(ctx, m.ID, "Spare", "#336699")
	if err != nil {
		t.Fatal(err)
	}
	// Another request found "Fresh" by its name and saved an item with it.
	it, _, err := Of(st).SaveItem(ctx, m.ID, NewItem{URL: "https://example.com/b", Title: "B", Text: "body", LabelIDs: []string{used.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if deleted, err := Of(st).DeleteUnusedLabel(ctx, m.ID, used.ID); err != nil || deleted {
		t.Fatalf("taking back a label an item carries: deleted %v, %v", deleted, err)
	}
	if deleted, err := Of(st).DeleteUnusedLabel(ctx, m.ID, unused.ID); err != nil || !deleted {
		t.Fatalf("taking back a label nothing carries: deleted %v, %v", deleted, err)
	}
	labels, err := Of(st).Labels(ctx, m.ID)
	if err != nil || len(labels) != 1 || labels[0].ID != used.ID {
		t.Fatalf("labels afterwards: %+v, %v; want Fresh alone", labels, err)
	}
	got, err := Of(st).SavedItem(ctx, m.ID, it.ID)
	if err != nil || len(got.LabelIDs) != 1 || got.LabelIDs[0] != used.ID {
		t.Fatalf("the other request's item: %+v, %v; want it labelled Fresh", got, err)
	}
	page, err := Of(st).SavedItemsPage(ctx, m.ID, ItemFilter{LabelsAll: [][]string{{"Fresh"}}}, PageRequest{Field: SortCreatedAt, First: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("label:Fresh afterwards: %+v, %v", page, err)
	}
	if _, err := Of(st).CreateLabel(ctx, m.ID, "Spare", "#336699"); err != nil {
		t.Fatalf("the name of a label taken back, made again: %v", err)
	}
	if _, err := Of(st).DeleteUnusedLabel(ctx, m.ID, unused.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("taking back a label already gone: %v, want ErrNotFound", err)
	}
}

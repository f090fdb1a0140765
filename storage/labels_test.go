package storage

import (
	"fmt"
	"sort"
	"sync"
	"testing"
)

func makeLabels(t testing.TB, st *Store, memberID, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		l, err := st.CreateLabel(memberID, fmt.Sprintf("%s %d", prefix, i), "#336699")
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
				if _, err := st.SetItemLabels(m.ID, []string{item.ID}, LabelChange{Add: []string{l}}); err != nil {
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
		got, err := st.SavedItem(m.ID, item.ID)
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
				if _, err := st.SetItemLabels(m.ID, items[i*2:i*2+30], LabelChange{Set: &set}); err != nil {
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

package library

import (
	"encoding/binary"
	"fmt"
	"maps"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

// filterCounts reads the member's fc/ keys.
func filterCounts(t testing.TB, st *storage.Store, memberID string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	p := filterCountKey(memberID, "", "")
	p = p[:len(p)-1] // .../fc/
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		return tx.Scan(p, nil, false, false, func(k, v []byte) (bool, error) {
			if len(v) != 8 {
				return false, fmt.Errorf("count %q of %d bytes", k, len(v))
			}
			got[string(k[len(p):])] = int64(binary.BigEndian.Uint64(v))
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// wantFilterCounts counts the member's items per filter from the items
// themselves (what the counts must say).
func wantFilterCounts(t testing.TB, st *storage.Store, memberID string) map[string]int64 {
	t.Helper()
	want := map[string]int64{}
	addN := func(kind, value string, n int64) {
		k := filterCountKey(memberID, kind, value)
		p := filterCountKey(memberID, "", "")
		if n != 0 {
			want[string(k[len(p)-1:])] += n
		}
	}
	add := func(kind, value string) { addN(kind, value, 1) }
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		prefix := itemKey(memberID, "")
		return tx.Scan(prefix, nil, false, false, func(_, v []byte) (bool, error) {
			var it SavedItem
			if err := parseItemRecord(v, &it); err != nil {
				return false, err
			}
			seen := map[string]bool{}
			for _, l := range it.LabelIDs {
				if !seen[l] {
					seen[l] = true
					add("l", l)
				}
			}
			add("t", typeCode(it.Type))
			if it.HighlightCount > 0 {
				add("h", "")
			}
			add("s", statusCode[it.Status])
			add("d", it.SourceDomain)
			// The reading counts, of the inbox and the archive.
			if it.Status != StatusActive && it.Status != StatusArchived {
				return true, nil
			}
			addN("rw", "", int64(it.WordCount))
			if it.ReadAt != nil {
				add("rn", "")
				addN("rr", "", int64(it.WordCount))
				for _, b := range readBuckets(*it.ReadAt) {
					add(b.kind, b.value)
				}
			}
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return want
}

// checkFilterCounts fails when the member's filter counts are not those of
// its items.
func checkFilterCounts(t testing.TB, st *storage.Store, memberID string) {
	t.Helper()
	got, want := filterCounts(t, st, memberID), wantFilterCounts(t, st, memberID)
	if !maps.Equal(got, want) {
		t.Fatalf("filter counts\n got %v\nwant %v", got, want)
	}
	checkOrderedKeys(t, st, memberID)
}

// checkOrderedKeys fails when the member's ordered filter keys (oy/, oh/,
// ot/, ol/) are not exactly those of its items, with their statuses and
// domains and either no copy of the item's record or its current one.
func checkOrderedKeys(t testing.TB, st *storage.Store, memberID string) {
	t.Helper()
	want, got := map[string]string{}, map[string]string{}
	recs := map[string]string{} // the record each key's copy must be
	stale := 0
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		if err := tx.Scan(itemKey(memberID, ""), nil, false, false, func(_, v []byte) (bool, error) {
			var it SavedItem
			if err := parseItemRecord(v, &it); err != nil {
				return false, err
			}
			keys, value := orderedFilterKeys(&it, nil)
			for _, k := range keys {
				want[string(k)] = string(value)
				recs[string(k)] = string(v)
			}
			return true, nil
		}); err != nil {
			return err
		}
		return scanOrderedKeys(tx, memberID, func(k, v []byte) (bool, error) {
			status, domain, rec := parseOrderedValue(v)
			got[string(k)] = string(append([]byte{status}, domain...))
			if rec != nil && string(rec) != recs[string(k)] {
				stale++
			}
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("ordered filter keys: %d, want %d\n got %q\nwant %q", len(got), len(want), got, want)
	}
	if stale > 0 {
		t.Fatalf("%d ordered filter keys carry a copy of a record that is not their item's", stale)
	}
}

// The counts follow every change of an item's labels, type, highlights,
// status and domain, in the item's transaction; a store without them (or
// with wrong ones) gets them from its keys when the indexer starts.
func TestFilterCountsFollowChanges(t *testing.T) {
	dir := t.TempDir()
	st, m := openBadgerAlice(t, dir)
	var labels []string
	for _, name := range []string{"one", "two", "three"} {
		l, err := Of(st).CreateLabel(t.Context(), m.ID, name, "#000000")
		if err != nil {
			t.Fatal(err)
		}
		labels = append(labels, l.ID)
	}
	var ids []string
	for i := 0; i < 40; i++ {
		in := NewItem{URL: fmt.Sprintf("https://d%d.example/%d", i%4, i), Title: fmt.Sprint("T", i), Text: "text",
			SourceDomain: fmt.Sprintf("d%d.example", i%4)}
		if i%5 == 0 {
			in.Type, in.URL = TypeNewsletter, ""
		}
		if i%2 == 0 {
			in.LabelIDs = []string{labels[i%3]}
		}
		it, _, err := Of(st).SaveItem(t.Context(), m.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	checkFilterCounts(t, st, m.ID)
	if got := filterCounts(t, st, m.ID)["t/N"]; got != 8 {
		t.Fatalf("newsletters counted %d, want 8", got)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"labels added", func() error {
			_, err := Of(st).SetItemLabels(t.Context(), m.ID, ids[:10], LabelChange{Add: labels[1:]})
			return err
		}},
		{"labels removed", func() error {
			_, err := Of(st).SetItemLabels(t.Context(), m.ID, ids[5:15], LabelChange{Remove: labels[:2]})
			return err
		}},
		{"archived", func() error { _, err := Of(st).SetItemsStatus(t.Context(), m.ID, ids[:12], StatusArchived); return err }},
		{"trashed", func() error {
			_, err := Of(st).SetItemsStatus(t.Context(), m.ID, ids[10:20], StatusDeleted)
			return err
		}},
		{"highlighted", func() error {
			for _, id := range ids[3:6] {
				if _, err := Of(st).CreateHighlight(t.Context(), m.ID, id, []HighlightSegment{{XPath: "/p[1]", StartOffset: 0, EndOffset: 1, Text: "x"}}, ""); err != nil {
					return err
				}
			}
			return nil
		}},
		{"saved again elsewhere", func() error {
			_, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: "https://d1.example/1", Title: "again", Text: "t", SourceDomain: "other.example"})
			return err
		}},
		{"deleted for good", func() error { return Of(st).PermanentlyDeleteItems(t.Context(), m.ID, ids[10:20]) }},
		{"label deleted", func() error { return Of(st).DeleteLabel(t.Context(), m.ID, labels[2]) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		checkFilterCounts(t, st, m.ID)
	}
	if got := filterCounts(t, st, m.ID)["h/"]; got != 3 {
		t.Fatalf("items with highlights counted %d, want 3", got)
	}
	// Counts lost or wrong (a store of version 2, or a bug): the indexer
	// counts again at the next start.
	if err := st.Update(t.Context(), func(tx *storage.Tx) error {
		if err := tx.DeletePrefix(filterCountKey(m.ID, "l", "")); err != nil {
			return err
		}
		if err := putCount(tx, filterCountKey(m.ID, "d", "gone.example"), 5); err != nil {
			return err
		}
		if err := putCount(tx, filterCountKey(m.ID, "s", "A"), 99); err != nil {
			return err
		}
		return tx.Put(textReadyKey(m.ID), []byte{2}, 0)
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.recountChunkSize = 2 // several transactions for the labels and domains
	st = openBadgerWith(t, dir, o)
	defer st.Close()
	waitIndexed(t, st, m.ID)
	checkFilterCounts(t, st, m.ID)
}

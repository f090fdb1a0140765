package library

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// pairFilters are single filters of the search corpus (bench/gqlbench
// corpus.go) at their extreme selectivities, by kind; savedRare is the
// saved: range of 10 items (STORE.json's saved_range).
func pairFilters(savedRare [2]time.Time) map[string][]struct {
	name string
	set  func(f *ItemFilter)
} {
	type one = struct {
		name string
		set  func(f *ItemFilter)
	}
	yes := true
	early, late := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	return map[string][]one{
		"label": {
			{"label:topic-00", func(f *ItemFilter) { f.LabelsAll = append(f.LabelsAll, []string{"topic-00"}) }},
			{"label:topic-01", func(f *ItemFilter) { f.LabelsAll = append(f.LabelsAll, []string{"topic-01"}) }},
			{"label:rare-label", func(f *ItemFilter) { f.LabelsAll = append(f.LabelsAll, []string{"rare-label"}) }},
		},
		"site": {
			{"site:.com", func(f *ItemFilter) { f.Site = ".com" }},
			{"site:rare-domain.org", func(f *ItemFilter) { f.Site = "rare-domain.org" }},
		},
		"in": {
			{"in:inbox", func(f *ItemFilter) { f.Status = StatusActive }},
			{"in:archive", func(f *ItemFilter) { f.Status = StatusArchived }},
			{"in:trash", func(f *ItemFilter) { f.Status = StatusDeleted }},
		},
		"type": {
			{"type:newsletter", func(f *ItemFilter) { f.Type = TypeNewsletter }},
			{"type:article", func(f *ItemFilter) { f.Type = TypeArticle }},
		},
		"has": {
			{"has:highlights", func(f *ItemFilter) { f.HasHighlights = &yes }},
		},
		"saved": {
			{"saved:all", func(f *ItemFilter) { f.SavedFrom, f.SavedTo = &early, &late }},
			{"saved:10", func(f *ItemFilter) { f.SavedFrom, f.SavedTo = &savedRare[0], &savedRare[1] }},
		},
	}
}

// TestSearchPairsOnSeededStore times every pair of filters of two kinds
// (and each filter alone) in-process on a store seeded by `gqlbench seed
// -corpus`: a benchmark run by hand, not in CI.
//
//	HEARTH_SEARCH_STORE=/var/tmp/corpus/store-100000 go test -tags nobadger,nomysql,nopgx \
//	  -run TestSearchPairsOnSeededStore -v -timeout 30m ./storage/
//
// The store is changed (the indexer brings its keys to this version): use
// a copy.
func TestSearchPairsOnSeededStore(t *testing.T) {
	dir := os.Getenv("HEARTH_SEARCH_STORE")
	if dir == "" {
		t.Skip("HEARTH_SEARCH_STORE names no seeded store")
	}
	var info struct {
		Member     string `json:"member"`
		SavedRange string `json:"saved_range"`
	}
	b, err := os.ReadFile(filepath.Clean(dir) + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	var rare [2]time.Time
	for i, s := range strings.SplitN(info.SavedRange, "..", 2) {
		if rare[i], err = time.Parse(time.RFC3339Nano, s); err != nil {
			t.Fatal(err)
		}
	}
	// The library's options as in production, each plan's figures kept
	// for the report (the last page's).
	var plan string
	o := defaultOptions()
	o.tracePlan = func(s string) { plan = s }
	st := openBadgerWith(t, dir, o)
	defer st.Close()
	m, err := members.Of(st).Member(t.Context(), info.Member)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	Of(st).textIndex().Notify(m.ID)
	time.Sleep(time.Second)
	waitIndexed(t, st, m.ID)
	t.Logf("index ready after %v", time.Since(start).Round(time.Millisecond))
	texts, trigrams, filterKeys, err := Of(st).SearchIndexSize(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("search keys: text copies %d, trigram index %d, filter keys %d bytes\n", texts, trigrams, filterKeys)
	runs := 21
	median := func(f ItemFilter) (time.Duration, int, error) {
		var ds []time.Duration
		n := 0
		for i := 0; i <= runs; i++ {
			s := time.Now()
			page, err := Of(st).SavedItemsPage(t.Context(), m.ID, f, PageRequest{Field: SortCreatedAt, Desc: true, First: 50})
			if err != nil {
				return 0, 0, err
			}
			if i > 0 {
				ds = append(ds, time.Since(s))
			}
			n = len(page.Items)
		}
		slices.Sort(ds)
		return ds[len(ds)/2], n, nil
	}
	filters := pairFilters(rare)
	kinds := []string{"label", "site", "in", "type", "has", "saved"}
	var worst time.Duration
	report := func(name string, f ItemFilter) {
		plan = ""
		d, n, err := median(f)
		if plan != "" && os.Getenv("HEARTH_SEARCH_TRACE") != "" {
			fmt.Println("   ", plan)
		}
		msg := ""
		if err != nil {
			msg = " error: " + err.Error()
		}
		worst = max(worst, d)
		fmt.Printf("%-44s %8.2f ms %3d items%s\n", name, float64(d.Microseconds())/1000, n, msg)
	}
	for _, k := range kinds {
		for _, a := range filters[k] {
			f := ItemFilter{Status: StatusAll}
			a.set(&f)
			report(a.name, f)
		}
	}
	for i, ka := range kinds {
		for _, kb := range kinds[i+1:] {
			for _, a := range filters[ka] {
				for _, b := range filters[kb] {
					f := ItemFilter{Status: StatusAll}
					a.set(&f)
					b.set(&f)
					report(a.name+" "+b.name, f)
				}
			}
		}
	}
	fmt.Printf("worst median %.2f ms\n", float64(worst.Microseconds())/1000)
}

// TestSearchCostsOnSeededStore measures the unit costs of the search
// planner's cost model (searchPlan) on a seeded store, as
// TestSearchPairsOnSeededStore (by hand).
func TestSearchCostsOnSeededStore(t *testing.T) {
	st, m := openSeededStore(t)
	labels, err := Of(st).Labels(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	var topic string
	for _, l := range labels {
		if l.Name == "topic-00" {
			topic = l.ID
		}
	}
	for round := 0; round < 3; round++ {
		if err := st.View(t.Context(), func(tx *storage.Tx) error {
			// Reading ids of a source.
			src := &idSource{parts: []idPart{{prefix: labelItemKey(m.ID, topic, ""), decimal: true}}}
			s := time.Now()
			readIDs(tx, src, 1<<30)
			key := time.Since(s) / time.Duration(len(src.ids))
			ids := src.ids
			// Point lookups in another filter's keys.
			prefix := typeItemsPrefix(m.ID, TypeNewsletter)
			s = time.Now()
			hits := 0
			for _, id := range ids[:5000] {
				if ok, err := tx.Has(encUint64(prefix, id)); err != nil {
					return err
				} else if ok {
					hits++
				}
			}
			probe := time.Since(s) / 5000
			// Reading items by id.
			s = time.Now()
			for _, id := range ids[:2000] {
				var it SavedItem
				if err := getItem(tx, itemKey(m.ID, fmt.Sprint(id)), &it); err != nil {
					return err
				}
			}
			read := time.Since(s) / 2000
			// The walk along the sort order, reading and decoding each.
			n := 0
			s = time.Now()
			for _, status := range []string{StatusActive, StatusArchived} {
				if err := (keyset{prefix: itemIndexPrefix(m.ID, status, SortCreatedAt), desc: true, values: true}).scan(tx, func(suf, rec []byte) (bool, error) {
					var it SavedItem
					if len(rec) > 0 {
						if err := parseItemRecord(rec, &it); err != nil {
							return false, err
						}
					} else if err := getItem(tx, itemKey(m.ID, fmt.Sprint(idBytes(string(suf)))), &it); err != nil {
						_ = err
					}
					n++
					return n%10000 != 0, nil
				}); err != nil {
					return err
				}
			}
			walk := time.Since(s) / time.Duration(n)
			// The walk passing over keys.
			n = 0
			s = time.Now()
			ks := keyset{prefix: itemIndexPrefix(m.ID, StatusActive, SortCreatedAt), desc: true, values: true,
				skip: func([]byte) bool { n++; return n < 30000 }}
			if err := ks.scan(tx, func(_, _ []byte) (bool, error) { return false, nil }); err != nil {
				return err
			}
			skip := time.Since(s) / time.Duration(n)
			fmt.Printf("key %v (%d ids)  probe %v (%d hits)  read %v  walk %v  skip %v\n", key, len(ids), probe, hits, read, walk, skip)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSearchVerifyCostOnSeededStore measures the cost of verifying a
// candidate (itemTextContains: its content record read, the text folded),
// and of decoding the content record with encoding/json instead, as
// TestSearchPairsOnSeededStore (by hand).
func TestSearchVerifyCostOnSeededStore(t *testing.T) {
	st, m := openSeededStore(t)
	needle := []byte("zanzibarite")
	for round := 0; round < 3; round++ {
		if err := st.View(t.Context(), func(tx *storage.Tx) error {
			var items []*SavedItem
			prefix := itemKey(m.ID, "")
			if err := tx.Scan(prefix, nil, true, false, func(_, v []byte) (bool, error) {
				it := new(SavedItem)
				items = append(items, it)
				return len(items) < 2000, parseItemRecord(v, it)
			}); err != nil {
				return err
			}
			s := time.Now()
			n := 0
			for _, it := range items {
				ok, err := itemTextContains(tx, it, needle)
				if err != nil {
					return err
				}
				if ok {
					n++
				}
			}
			verify := time.Since(s) / time.Duration(len(items))
			s = time.Now()
			for _, it := range items {
				var c ItemContent
				if err := tx.GetJSON(contentKey(m.ID, it.ID), &c); err != nil {
					return err
				}
				bytes.Contains(textindex.AppendFold(nil, c.Text), needle)
			}
			dec := time.Since(s) / time.Duration(len(items))
			fmt.Printf("verify %v (%d found)  by encoding/json %v\n", verify, n, dec)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

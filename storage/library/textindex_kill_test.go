package library

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/internal/testchild"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestSearchKillHelper is the child of TestSearchConsistentAfterKill: it
// saves items into the store of HEARTH_KILL_DIR until it is killed,
// printing each acknowledged one.
func TestSearchKillHelper(t *testing.T) {
	dir := os.Getenv("HEARTH_KILL_DIR")
	if dir == "" {
		t.Skip("child of TestSearchConsistentAfterKill")
	}
	st, err := openWith(dir, storage.Options{}, testOptions())
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	m, err := members.Of(st).Member(t.Context(), "alice")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		word := fmt.Sprintf("kw%05dq", i)
		text := strings.Repeat("rye bread and caraway seeds. ", 40) + word
		if _, _, err := Of(st).SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://example.com/%d", i), Title: "Loaf " + word, Text: text}); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if i%7 == 3 { // changes of title too: re-indexing after a crash
			title := "Renamed " + word + "z"
			if _, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, mustItemByURL(st, m.ID, i), ItemMetadata{Title: &title}); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
		fmt.Println("saved", i)
	}
}

func mustItemByURL(st *storage.Store, memberID string, i int) string {
	var id string
	_ = st.View(context.Background(), func(tx *storage.Tx) error {
		u, _ := NormalizeURL(fmt.Sprintf("https://example.com/%d", i))
		b, err := tx.Get(urlKey(memberID, u))
		id = string(b)
		return err
	})
	return id
}

// A process killed (SIGKILL) while saving items and indexing them leaves
// a store whose searches find every acknowledged item, before the indexer
// has caught up after the restart and after, with the same answers as a
// brute-force scan.
func TestSearchConsistentAfterKill(t *testing.T) {
	badgerOnly(t)
	dir := t.TempDir()
	st, m := openBadgerAlice(t, dir)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		child := testchild.Start(t, "TestSearchKillHelper", "HEARTH_KILL_DIR="+dir)
		acked := 0
		for child.Lines.Scan() {
			line := child.Lines.Text()
			if strings.HasPrefix(line, "error:") {
				t.Fatal(line)
			}
			if strings.HasPrefix(line, "saved ") {
				acked++
				if acked == 150+round*40 {
					break
				}
			}
		}
		child.Kill(t)
		_ = child.Wait()
		st := openBadger(t, dir)
		if n, err := Of(st).SearchIndexBacklog(t.Context(), m.ID); err == nil {
			t.Logf("round %d: %d acknowledged, backlog at restart %d", round, acked, n)
		}
		// Every item the brute force finds, for words of acknowledged
		// items (and of items saved but not acknowledged), found by the
		// index; first with texts pending, then with the index caught up.
		for pass := 0; pass < 2; pass++ {
			var all []*SavedItem
			texts := map[string]string{}
			if err := Of(st).ForEachSavedItem(t.Context(), m.ID, func(it *SavedItem, c *ItemContent) error {
				all = append(all, it)
				texts[it.ID] = FoldText(it.Title) + "\x00" + FoldText(it.Description) + "\x00" + FoldText(c.Text)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(all) < acked {
				t.Fatalf("round %d: %d items after the kill, %d acknowledged", round, len(all), acked)
			}
			for _, q := range []string{"kw00003q", "KW00010QZ", "kw0014", "kw000", "caraway seeds. kw0", "zzz", "renamed kw", "loaf kw001"} {
				var want []string
				for _, it := range all {
					if strings.Contains(texts[it.ID], FoldText(q)) {
						want = append(want, it.ID)
					}
				}
				var got []string
				after := ""
				for {
					page, err := Of(st).SavedItemsPage(t.Context(), m.ID, ItemFilter{Text: q}, PageRequest{Field: SortCreatedAt, First: 100, After: after})
					if err != nil {
						t.Fatal(err)
					}
					for _, it := range page.Items {
						got = append(got, it.ID)
					}
					if !page.HasNext {
						break
					}
					after = page.Cursors[len(page.Cursors)-1]
				}
				sort.Strings(want)
				sort.Strings(got)
				if !slices.Equal(got, want) {
					t.Fatalf("round %d pass %d: %q found %d items, brute force %d", round, pass, q, len(got), len(want))
				}
			}
			waitIndexed(t, st, m.ID)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

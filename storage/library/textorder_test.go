package library

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// A word's pages in the order of creation, read from the text index's
// candidates segment by segment (textOrderedPage), equal a brute-force
// scan: in both directions, every status, within ranges of createdAt,
// with cursors, over segments merged and not, items imported with old
// dates (new documents of the index, old in the order), ties of createdAt,
// texts changed and items removed, a backup restored, and texts waiting for
// the indexer; for needles that are a word, a part of a longer one, in
// other cases or another script, of 3 bytes (one trigram), and across
// punctuation or a space.
func TestWordPagesInTheOrderOfCreation(t *testing.T) {
	st, m := openSavedTest(t)
	r := rand.New(rand.NewSource(7))
	words := []string{"plain", "words", "quokka", "Quokkas", "among", "bread", "rye", "crumb", "rye-bread,", "ΣΟΦΊΑ", "σοφία.", "Straße", "quokka's"}
	text := func(n int) string {
		var b []string
		for range n {
			b = append(b, words[r.Intn(len(words))])
		}
		return strings.Join(b, " ")
	}
	all := map[string]*propItem{}
	base := storage.Now().Add(-time.Hour)
	write := func(from, to int) {
		err := st.Update(t.Context(), func(tx *storage.Tx) error {
			for i := from; i < to; i++ {
				at := base.Add(time.Duration(i) * time.Second)
				switch r.Intn(5) {
				case 0: // imported: an old date
					at = base.Add(-time.Duration(r.Intn(100000)) * time.Second)
				case 1: // the same createdAt as another: ties by id
					at = base.Add(time.Duration(i-i%3) * time.Second)
				}
				p := &propItem{title: text(2), text: text(1 + r.Intn(6))}
				it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: p.title,
					CreatedAt: at, UpdatedAt: at}
				if r.Intn(3) == 0 {
					it.Status = StatusArchived
				}
				if err := writeItem(tx, itemChange{it: it, content: &ItemContent{Text: p.text}}); err != nil {
					return err
				}
				p.it = it
				all[it.ID] = p
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for batch := range 11 { // segments of 40, eight of them merged
		write(batch*40, batch*40+40)
		waitIndexed(t, st, m.ID)
	}
	var ids []string
	for id := range all {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, id := range ids {
		p := all[id]
		switch i % 9 {
		case 0: // a new text: a new number in a new segment, its createdAt as it was
			title := text(3)
			if _, err := Of(st).UpdateItemMetadata(t.Context(), m.ID, id, ItemMetadata{Title: &title}); err != nil {
				t.Fatal(err)
			}
			p.title = title
		case 4:
			if _, err := Of(st).SetItemsStatus(t.Context(), m.ID, []string{id}, StatusDeleted); err != nil {
				t.Fatal(err)
			}
			if err := Of(st).PermanentlyDeleteItems(t.Context(), m.ID, []string{id}); err != nil {
				t.Fatal(err)
			}
			delete(all, id)
		}
	}
	waitIndexed(t, st, m.ID)
	for id, p := range all {
		it, err := Of(st).SavedItem(t.Context(), m.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		p.it = it
	}
	check := func(round string) {
		t.Helper()
		for q := range 120 {
			f := ItemFilter{Status: []string{StatusActive, StatusArchived, StatusAll}[q%3],
				Text: []string{"quokka", "QUOKKAS", "okk", "plain words", "rye", "absent", "e-br", "ΣΟΦ", "οφία", "STRASSE", "straße",
					"a's", "ka's", "rye-bread", "ead,", "ry"}[r.Intn(16)]}
			if q%4 == 3 {
				a, b := base.Add(-time.Duration(r.Intn(100000))*time.Second), base.Add(time.Duration(r.Intn(500))*time.Second)
				f.SavedFrom, f.SavedTo = &a, &b
			}
			desc := q%2 == 0
			want := bruteForce(all, f, SortCreatedAt, desc)
			got := allPages(t, st, m.ID, f, SortCreatedAt, desc, []int{1, 3, 7, 50}[r.Intn(4)])
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %+v desc %v:\n got %v\nwant %v", round, f, desc, got, want)
			}
		}
	}
	// The index answers in the order of creation (every segment has its
	// bounds): the pages below are its.
	if err := st.View(t.Context(), func(tx *storage.Tx) error {
		_, _, ok, err := memberIndex(m.ID).Ordered(tx, []byte(FoldText("quokka")), true, 0, math.MaxUint64, maxVerified)
		if err == nil && !ok {
			err = fmt.Errorf("the index cannot give candidates in the order of creation")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	check("indexed")
	// A backup restored (the text index's keys among its records) answers
	// the same pages.
	var backup bytes.Buffer
	if err := st.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Replace(bytes.NewReader(backup.Bytes())); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, st, m.ID)
	check("restored")
	Of(st).state().indexPaused.Store(true)
	defer Of(st).state().indexPaused.Store(false)
	write(440, 470)
	check("30 texts waiting")
}

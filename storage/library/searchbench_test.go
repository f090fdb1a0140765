package library

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// BenchmarkSearchWords times a first page (50 items, newest first) of a
// word search on 2,000 articles of 5–10 KB, the index caught up: a common
// word (the candidates verified until 50 match), a word in one item, and
// a word in none.
func BenchmarkSearchWords(b *testing.B) {
	st, m := openSavedTest(b)
	r := rand.New(rand.NewSource(1))
	vocab := benchVocab(r)
	z := rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1))
	const n = 2000
	for i := 0; i < n; i += 200 {
		err := st.Update(b.Context(), func(tx *storage.Tx) error {
			for j := i; j < i+200; j++ {
				title, text := benchArticle(r, z, vocab)
				if j == n/2 {
					text += " zyzzyva"
				}
				at := storage.Now()
				it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive, Title: title, CreatedAt: at, UpdatedAt: at}
				if err := writeItem(tx, itemChange{it: it, content: &ItemContent{Text: text}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	waitIndexed(b, st, m.ID)
	for _, c := range []struct{ name, word string }{{"common", vocab[2]}, {"rare", "zyzzyva"}, {"none", "xylocarpqz"}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Of(st).SavedItemsPage(b.Context(), m.ID, ItemFilter{Text: c.word}, PageRequest{Field: SortCreatedAt, Desc: true, First: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSavedItemsPage times first pages (50 items, newest first) of
// n items: of the inbox, at 90 % of it, sorted by title, and of a label on
// one item in 20 (a filter's ordered keys walked).
func BenchmarkSavedItemsPage(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		st, m := openSavedTest(b)
		l, err := Of(st).CreateLabel(b.Context(), m.ID, "news", "#000000")
		if err != nil {
			b.Fatal(err)
		}
		var last string
		// 200 items a transaction: 1,000 with their ordered keys' copies
		// outgrow Badger's transaction limit at 8 MiB memtables.
		for i := 0; i < n; i += 200 {
			err := st.Update(b.Context(), func(tx *storage.Tx) error {
				for j := i; j < i+200 && j < n; j++ {
					t := storage.Now().Add(time.Duration(j) * time.Millisecond)
					it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive,
						Title: fmt.Sprintf("t%d", j), CreatedAt: t, UpdatedAt: t, WordCount: j}
					if j%20 == 0 {
						it.LabelIDs = []string{l.ID}
					}
					if err := writeItem(tx, itemChange{it: it}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		// Cursor at 90 % of the list.
		after := ""
		for seen := 0; seen < n*9/10; {
			p, err := Of(st).SavedItemsPage(b.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortCreatedAt, Desc: true, First: 100, After: after})
			if err != nil {
				b.Fatal(err)
			}
			seen += len(p.Items)
			after = p.Cursors[len(p.Cursors)-1]
		}
		last = after
		b.Run(fmt.Sprintf("first/n=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Of(st).SavedItemsPage(b.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortCreatedAt, Desc: true, First: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("deep90/n=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Of(st).SavedItemsPage(b.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortCreatedAt, Desc: true, First: 50, After: last}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("title/n=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Of(st).SavedItemsPage(b.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortTitle, First: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
		waitIndexed(b, st, m.ID)
		b.Run(fmt.Sprintf("label/n=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p, err := Of(st).SavedItemsPage(b.Context(), m.ID, ItemFilter{LabelsAll: [][]string{{"news"}}}, PageRequest{Field: SortCreatedAt, Desc: true, First: 50})
				if err != nil || len(p.Items) != 50 {
					b.Fatal(p, err)
				}
			}
		})
	}
}

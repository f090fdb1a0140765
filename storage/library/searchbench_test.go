package library

import (
	"math/rand"
	"testing"

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

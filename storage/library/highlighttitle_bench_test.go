package library

import (
	"fmt"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// BenchmarkHighlightsByTitle times a first page (20 highlights) of the
// highlights sorted by their item's title, asc and desc, for a member of
// 100,000 items of which 5 have highlights (2 each): what a page costs
// however many items have none.
func BenchmarkHighlightsByTitle(b *testing.B) {
	st, m := openSavedTest(b)
	const n, every = 100000, 20000
	var highlighted []string
	for i := 0; i < n; i += 200 {
		err := st.Update(b.Context(), func(tx *storage.Tx) error {
			for j := i; j < i+200 && j < n; j++ {
				t := storage.Now().Add(time.Duration(j) * time.Millisecond)
				it := &SavedItem{ID: testID(), MemberID: m.ID, Type: TypeArticle, Status: StatusActive,
					Title: fmt.Sprintf("t%06d", (j*7919)%n), CreatedAt: t, UpdatedAt: t}
				if j%every == every/2 {
					highlighted = append(highlighted, it.ID)
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
	for _, id := range highlighted {
		for range 2 {
			if _, err := Of(st).CreateHighlight(b.Context(), m.ID, id, []HighlightSegment{{XPath: "/p[1]", Text: "passage"}}, ""); err != nil {
				b.Fatal(err)
			}
		}
	}
	waitIndexed(b, st, m.ID)
	for _, desc := range []bool{false, true} {
		b.Run(fmt.Sprintf("desc=%v", desc), func(b *testing.B) {
			for b.Loop() {
				p, err := Of(st).HighlightsPage(b.Context(), m.ID, ItemFilter{}, PageRequest{Field: SortTitle, Desc: desc, First: 20})
				if err != nil || len(p.Highlights) != 2*len(highlighted) {
					b.Fatal(p, err)
				}
			}
		})
	}
}

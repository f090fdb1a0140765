package library

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// The catch-up of an older store's reading counts, two of them at once
// (two nodes' indexers), beside writers changing the member's items on
// either side of its cursor, on either engine: the counts it leaves are
// those of the items.
func TestReadingCountsCaughtUpBesideWriters(t *testing.T) {
	st, m := openAlice(t)
	lib := Of(st)
	items := saveN(t, st, m.ID, 40)
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	if _, err := lib.SetItemsRead(t.Context(), m.ID, ids[:20], true); err != nil {
		t.Fatal(err)
	}
	asVersion8(t, st, m.ID)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 2 {
		wg.Go(func() {
			if err := lib.recountReading(m.ID, func() bool { return false }, 3); err != nil {
				errs <- fmt.Errorf("catch-up: %w", err)
			}
		})
	}
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			for i := range 40 {
				id := ids[rng.IntN(len(ids))]
				var err error
				switch i % 4 {
				case 0:
					_, err = lib.SetItemsRead(t.Context(), m.ID, []string{id}, rng.IntN(2) == 0)
				case 1:
					_, err = lib.SetItemsStatus(t.Context(), m.ID, []string{id}, []string{StatusActive, StatusArchived, StatusDeleted}[rng.IntN(3)])
				case 2:
					_, _, err = lib.SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://w%d.example/%d", w, i), Title: "t", Text: "x y", WordCount: rng.IntN(500)})
				case 3:
					_, err = lib.UpdateReadingProgress(t.Context(), m.ID, id, 100)
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d step %d: %w", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitIndexed(t, st, m.ID)
	checkReadingCounts(t, st, m.ID)
}

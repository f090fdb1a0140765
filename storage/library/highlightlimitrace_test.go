package library

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Highlights made at once on one item, by count and by bytes, on either
// engine: each transaction reads and writes the item's record, so that
// two cannot both take the last room; the item ends at its limit, with as
// many highlights as were taken, the others refused with the limit.
func TestHighlightsMadeAtOnceStayWithinTheItemsLimits(t *testing.T) {
	for _, c := range []struct {
		name         string
		count, bytes int
		quote        int // bytes of each quote
		fit          int
	}{{"count", 4, MaxItemHighlightBytes, 10, 4}, {"bytes", 100, 3 * 100, 100 - len("/p[1]"), 3}} {
		t.Run(c.name, func(t *testing.T) {
			st, m := openLimited(t, c.count, c.bytes)
			item := saveN(t, st, m.ID, 1)[0]
			lib := Of(st)
			const tries = 12
			var wg sync.WaitGroup
			errs := make([]error, tries)
			for i := range tries {
				wg.Go(func() {
					q := fmt.Sprintf("%02d", i) + strings.Repeat("q", c.quote-2)
					_, errs[i] = lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs(q), "")
				})
			}
			wg.Wait()
			taken := 0
			for _, err := range errs {
				switch {
				case err == nil:
					taken++
				case !storage.IsInvalid(err) || !strings.Contains(err.Error(), "at most"):
					t.Fatalf("a highlight made beside others: %v", err)
				}
			}
			if taken != c.fit {
				t.Fatalf("%d highlights taken, want %d (the item's limit)", taken, c.fit)
			}
			itemHighlightsAre(t, st, m.ID, item.ID, c.fit)
			if _, err := lib.CreateHighlight(t.Context(), m.ID, item.ID, quoteSegs("x"), ""); !storage.IsInvalid(err) {
				t.Fatalf("one more after: %v, want the limit", err)
			}
		})
	}
}

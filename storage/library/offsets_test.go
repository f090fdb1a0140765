package library

import (
	"errors"
	"fmt"
	"testing"
)

// An offset read from the fences names the item a walk from the start
// reaches, for every status set, both orders and every offset, before and
// after the writes that move items between buckets and split them.
func TestOffsetCursorIsWhereAWalkArrives(t *testing.T) {
	bulk(t)
	st, m := openSavedTest(t)
	s := Of(st)
	var ids []string
	save := func(n int) {
		for range n {
			it, _, err := s.SaveItem(t.Context(), m.ID, NewItem{URL: fmt.Sprintf("https://example.com/%d", len(ids)), Title: "t"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, it.ID)
		}
	}
	save(700)
	if _, _, _, err := s.OffsetCursor(t.Context(), m.ID, StatusAll, false, 15); !errors.Is(err, ErrOffsetsNotReady) {
		t.Fatalf("before EnsureOffsets: %v", err)
	}
	if err := s.EnsureOffsets(t.Context(), m.ID); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, status := range []string{StatusActive, StatusArchived, StatusDeleted, StatusNotDeleted, StatusAll} {
			for _, desc := range []bool{false, true} {
				req := PageRequest{Field: SortCreatedAt, Desc: desc, First: 1000}
				var cursors []string
				for {
					pg, err := s.SavedItemsPage(t.Context(), m.ID, ItemFilter{Status: status}, req)
					if err != nil {
						t.Fatal(err)
					}
					cursors = append(cursors, pg.Cursors...)
					if !pg.HasNext {
						break
					}
					req.After = pg.Cursors[len(pg.Cursors)-1]
				}
				for offset := 0; offset <= len(cursors)+1; offset++ {
					c, total, past, err := s.OffsetCursor(t.Context(), m.ID, status, desc, offset)
					want := ""
					if offset > 0 && offset <= len(cursors) {
						want = cursors[offset-1]
					}
					past2 := offset > len(cursors)
					if err != nil || (past2 || desc) && total != len(cursors) || past != past2 || c != want {
						t.Fatalf("%s: %s desc=%v offset %d: %q, %d, %v, %v; want %q, %d", when, status, desc, offset, c, total, past, err, want, len(cursors))
					}
				}
			}
		}
	}
	check("built")
	save(900) // the last bucket splits, more than once
	if _, err := s.SetItemsStatus(t.Context(), m.ID, ids[100:400], StatusArchived); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetItemsStatus(t.Context(), m.ID, ids[390:420], StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := s.PermanentlyDeleteItems(t.Context(), m.ID, ids[395:420]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetItemsStatus(t.Context(), m.ID, ids[1000:1300], StatusDeleted); err != nil {
		t.Fatal(err)
	}
	if err := s.PermanentlyDeleteItems(t.Context(), m.ID, ids[1000:1300]); err != nil {
		t.Fatal(err) // whole buckets empty
	}
	check("after writes")
}

// A highlight keeps where it starts in the item's text (Omnivore's
// highlightPositionPercent), found with the text before it when the
// passage occurs twice; 0 when the passage is not in the text.
func TestHighlightPositionPercent(t *testing.T) {
	st, m := openSavedTest(t)
	s := Of(st)
	text := "Rise once. " + "0123456789012345678901234567890123456789" + " Rise once. The end."
	it, _, err := s.SaveItem(t.Context(), m.ID, NewItem{URL: "https://example.com/p", Title: "p", HTML: "<p>" + text + "</p>", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		before, quote string
		want          float64
	}{
		{"", "Rise once.", 0},
		{"0123456789 ", "Rise once.", float64(len(text)-len("Rise once. The end.")) * 100 / float64(len(text))},
		{"", "The end", float64(len(text)-len("The end.")) * 100 / float64(len(text))},
		{"", "not in the text", 0},
	} {
		h, err := s.CreateHighlight(t.Context(), m.ID, it.ID, []HighlightSegment{{XPath: "/p[1]", BeforeText: c.before, Text: c.quote, EndOffset: len(c.quote)}}, "")
		if err != nil {
			t.Fatal(err)
		}
		if d := h.PositionPercent - c.want; d > 0.01 || d < -0.01 {
			t.Errorf("%q after %q: %v%%, want %.2f%%", c.quote, c.before, h.PositionPercent, c.want)
		}
	}
}

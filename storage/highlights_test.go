package storage

import (
	"errors"
	"strings"
	"testing"
)

// The limits on a highlight's segments count characters, as their messages
// say, not bytes: CJK text (3 bytes a character in UTF-8) gets the same
// room as ASCII.
func TestHighlightLimitsCountCharacters(t *testing.T) {
	st, m := openSavedTest(t)
	item := saveN(t, st, m.ID, 1)[0]
	cases := []struct {
		name string
		seg  HighlightSegment
		ok   bool
	}{
		{"4000 × 語 text", HighlightSegment{XPath: "/p", Text: strings.Repeat("語", 4000)}, true},
		{"10000 × 語 text", HighlightSegment{XPath: "/p", Text: strings.Repeat("語", MaxSegmentText)}, true},
		{"10001 × 語 text", HighlightSegment{XPath: "/p", Text: strings.Repeat("語", MaxSegmentText+1)}, false},
		{"1000 × é context", HighlightSegment{XPath: "/p", BeforeText: strings.Repeat("é", MaxSegmentContext), AfterText: strings.Repeat("é", MaxSegmentContext)}, true},
		{"1001 × é before", HighlightSegment{XPath: "/p", BeforeText: strings.Repeat("é", MaxSegmentContext+1)}, false},
		{"2000-character xpath", HighlightSegment{XPath: "/" + strings.Repeat("段", MaxXPathLen-1)}, true},
		{"2001-character xpath", HighlightSegment{XPath: "/" + strings.Repeat("段", MaxXPathLen)}, false},
	}
	for _, c := range cases {
		_, err := st.CreateHighlight(m.ID, item.ID, []HighlightSegment{c.seg}, "")
		if c.ok && err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.ok && !IsInvalid(err) {
			t.Errorf("%s: %v, want an invalid-input error", c.name, err)
		}
	}
}

// Deleting highlights with an id given twice deletes them, as the batch
// mutations on items do, and the item's highlight count drops by one each.
func TestDeleteHighlightsWithARepeatedID(t *testing.T) {
	st, m := openSavedTest(t)
	item := saveN(t, st, m.ID, 1)[0]
	var ids []string
	for i := 0; i < 3; i++ {
		h, err := st.CreateHighlight(m.ID, item.ID, []HighlightSegment{{XPath: "/p", Text: "x"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID)
	}
	if err := st.DeleteHighlights(m.ID, []string{ids[0], ids[1], ids[0]}); err != nil {
		t.Fatalf("delete with a repeated id: %v", err)
	}
	left, err := st.ItemHighlights(m.ID, item.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != ids[2] {
		t.Fatalf("%d highlights left, want only %s", len(left), ids[2])
	}
	got, err := st.SavedItem(m.ID, item.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.HighlightCount != 1 {
		t.Fatalf("highlight count %d, want 1", got.HighlightCount)
	}
	// An unknown id among them still deletes nothing.
	if err := st.DeleteHighlights(m.ID, []string{ids[2], ids[0]}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete with an unknown id: %v, want ErrNotFound", err)
	}
	if left, _ := st.ItemHighlights(m.ID, item.ID); len(left) != 1 {
		t.Fatalf("%d highlights left after a refused delete, want 1", len(left))
	}
}

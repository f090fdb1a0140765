package storage

import (
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

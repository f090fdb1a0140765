package library

import (
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// addImportedHighlights gives an item the member already had the imported
// highlights it lacks (Readwise's highlights CSV after its Reader CSV,
// Pocket's annotations of an item saved before), a highlight being the
// same when its text is, white space aside: importing a file again adds
// nothing. A note on the item as a whole goes to the item's one note as
// AddNote adds it (after a blank line), unless the note holds it already
// (noteHolds). It returns how many highlights it added and whether it
// joined a note to the item's; the caller counts the highlights in
// it.HighlightCount and writes it, moving its updatedAt for either (a
// client that syncs by updatedAt, as Omnivore's Obsidian and Logseq
// plugins do, takes the joined note then).
func addImportedHighlights(tx *storage.Tx, it *SavedItem, hls []ImportHighlight) (added int, joined bool, err error) {
	if len(hls) == 0 {
		return 0, false, nil
	}
	have := map[string]bool{}
	var note *Highlight
	err = eachItemHighlight(tx, it.MemberID, it.ID, func(h *Highlight) (bool, error) {
		if h.IsNote() && note == nil {
			note = h
		}
		have[importKey(h.Segments, h.Note)] = true
		return true, nil
	})
	if err != nil {
		return 0, false, err
	}
	for _, h := range hls {
		if len(h.Segments) == 0 && note != nil {
			if noteHolds(note.Note, h.Note) {
				continue
			}
			text, err := joinNote(note.Note, h.Note)
			if err != nil {
				continue // a note too long to join does not cost the item
			}
			if err := writeHighlightNote(tx, it.MemberID, note, text); err != nil {
				return added, joined, err
			}
			joined = true
			continue
		}
		k := importKey(h.Segments, h.Note)
		if have[k] {
			continue
		}
		have[k] = true
		c, u := h.CreatedAt, h.UpdatedAt
		if c.IsZero() {
			c = storage.Now()
		}
		if u.Before(c) {
			u = c
		}
		pct, err := positionPercent(tx, it.MemberID, it.ID, h.Segments)
		if err != nil {
			return added, joined, err
		}
		nh, err := putNewHighlight(tx, it, h.Segments, h.Note, c.UTC().Truncate(time.Millisecond), u.UTC().Truncate(time.Millisecond), pct)
		if err != nil {
			return added, joined, err
		}
		if nh.IsNote() {
			note = nh
		}
		added++
	}
	return added, joined, nil
}

// importKey is a highlight's text without its white space; a note's
// (no segments) is its note's, apart from the highlights' texts.
func importKey(segs []HighlightSegment, note string) string {
	var b strings.Builder
	if len(segs) == 0 {
		b.WriteString("\x00note ")
		for _, f := range strings.Fields(note) {
			b.WriteString(f)
		}
	}
	for _, s := range segs {
		for _, f := range strings.Fields(s.Text) {
			b.WriteString(f)
		}
	}
	return b.String()
}

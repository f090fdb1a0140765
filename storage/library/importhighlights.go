package library

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// importedHighlights is what one transaction of an import has read of the
// highlights of the items it adds to, by item id: an import may name one
// item in many entries (Readwise's rows of two documents, interleaved, are
// as many entries as rows), and each read all the item's highlights, and
// its content, again, so that an import's cost grew with the square of
// its rows. It is made anew for each transaction, which keeps it as the
// highlights it writes change them.
type importedHighlights map[string]*itemHighlights

// itemHighlights is what an import has read of an item's highlights: their
// keys (importKey), its note, and its text (nil until a highlight's place
// is looked for in it).
type itemHighlights struct {
	have map[string]bool
	note *Highlight
	text *string
	// bytes is the highlights' highlightBytes, against the limit.
	bytes int
}

// of reads the highlights of it, once a transaction.
func (k importedHighlights) of(tx *storage.Tx, it *SavedItem) (*itemHighlights, error) {
	if ih := k[it.ID]; ih != nil {
		return ih, nil
	}
	ih := &itemHighlights{have: map[string]bool{}}
	err := eachItemHighlight(tx, it.MemberID, it.ID, func(h *Highlight) (bool, error) {
		if h.IsNote() && ih.note == nil {
			ih.note = h
		}
		ih.have[importKey(h.Segments, h.Note)] = true
		ih.bytes += highlightBytes(h.Segments, h.Note)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	k[it.ID] = ih
	return ih, nil
}

// percentIn is where a highlight's segments are in the item's text
// (percentIn), the text read once.
func (ih *itemHighlights) percentIn(tx *storage.Tx, it *SavedItem, segs []HighlightSegment) (float64, error) {
	if len(segs) == 0 || segs[0].Text == "" {
		return 0, nil
	}
	if ih.text == nil {
		var content ItemContent
		if err := tx.GetJSON(contentKey(it.MemberID, it.ID), &content); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return 0, err
		}
		ih.text = &content.Text
	}
	return percentIn(*ih.text, segs), nil
}

// addImportedHighlights gives an item the member already had the imported
// highlights it lacks (Readwise's highlights CSV after its Reader CSV,
// Pocket's annotations of an item saved before), a highlight being the
// same when its text is, white space aside: importing a file again adds
// nothing. A note on the item as a whole goes to the item's one note as
// AddNote adds it (after a blank line), unless the note holds it already
// (noteHolds). It returns how many highlights it added and whether it
// joined a note to the item's, and sets the item's bytes (it.hlBytes) to
// what its highlights hold then; the caller counts the highlights in
// it.HighlightCount and writes it, moving its updatedAt for either (a
// client that syncs by updatedAt, as Omnivore's Obsidian and Logseq
// plugins do, takes the joined note then). What it reads of the item's
// highlights and text is kept in known for the rest of the transaction.
// Past the item's highlights' limits (lim), cut is how many it had no
// room for (a note too long to join among them).
func addImportedHighlights(tx *storage.Tx, it *SavedItem, hls []ImportHighlight, known importedHighlights, lim highlightLimits) (added, cut int, joined bool, err error) {
	if len(hls) == 0 {
		return 0, 0, false, nil
	}
	ih, err := known.of(tx, it)
	if err != nil {
		return 0, 0, false, err
	}
	for _, h := range hls {
		if len(h.Segments) == 0 && ih.note != nil {
			if noteHolds(ih.note.Note, h.Note) {
				continue
			}
			text, err := joinNote(ih.note.Note, h.Note)
			if err != nil {
				continue // a note too long to join does not cost the item
			}
			grow := len(text) - len(ih.note.Note)
			if ih.bytes+grow > lim.bytes {
				cut++
				continue
			}
			ih.bytes += grow
			if err := writeHighlightNote(tx, it.MemberID, ih.note, text); err != nil {
				return added, cut, joined, err
			}
			joined = true
			continue
		}
		k := importKey(h.Segments, h.Note)
		if ih.have[k] {
			continue
		}
		size := highlightBytes(h.Segments, h.Note)
		if it.HighlightCount+added >= lim.count || ih.bytes+size > lim.bytes {
			cut++
			continue
		}
		ih.bytes += size
		ih.have[k] = true
		c, u := h.CreatedAt, h.UpdatedAt
		if c.IsZero() {
			c = storage.Now()
		}
		if u.Before(c) {
			u = c
		}
		pct, err := ih.percentIn(tx, it, h.Segments)
		if err != nil {
			return added, cut, joined, err
		}
		nh, err := putNewHighlight(tx, it, h.Segments, h.Note, c.UTC().Truncate(time.Millisecond), u.UTC().Truncate(time.Millisecond), pct)
		if err != nil {
			return added, cut, joined, err
		}
		if nh.IsNote() {
			ih.note = nh
		}
		added++
	}
	it.hlBytes = ih.bytes
	return added, cut, joined, nil
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

// fit is the highlights of a new imported item that its limits take, in
// the file's order, how many they do not, and the bytes of those it takes.
func (l highlightLimits) fit(hls []ImportHighlight) (_ []ImportHighlight, cut, bytes int) {
	for i, h := range hls {
		size := highlightBytes(h.Segments, h.Note)
		if i < l.count && bytes+size <= l.bytes {
			bytes += size
			continue
		}
		// Past a limit: the rest are taken as long as they fit.
		kept := slices.Clone(hls[:i])
		for _, h := range hls[i:] {
			size := highlightBytes(h.Segments, h.Note)
			if len(kept) < l.count && bytes+size <= l.bytes {
				kept = append(kept, h)
				bytes += size
			}
		}
		return kept, len(hls) - len(kept), bytes
	}
	return hls, 0, bytes
}

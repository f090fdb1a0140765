package library

import (
	"fmt"

	"github.com/hearthkit/caddy-hearth/storage"
)

// The bounds on an item's highlights. Every page that shows them (the
// reader's, the EPUB, the exports, Omnivore's search with highlights,
// GraphQL's highlights of an article) reads them all: their number and
// their bytes bound what such a page costs.
const (
	// MaxItemHighlights is how many highlights an item holds, its note
	// counted: room for a Kindle book's few thousand.
	MaxItemHighlights = 10000
	// MaxItemHighlightBytes is how many bytes an item's highlights hold
	// in all (highlightBytes): a highlight alone may hold far more than a
	// ten-thousandth of it (MaxSegments segments of MaxSegmentText
	// characters, each of up to 4 bytes, and their context and path), so
	// the count alone would let an item's highlights grow to gigabytes.
	MaxItemHighlightBytes = 32 << 20
)

// highlightLimits are a store's bounds on an item's highlights
// (options.maxItemHighlights, options.maxItemHighlightBytes).
type highlightLimits struct{ count, bytes int }

func (o *options) highlightLimits() highlightLimits {
	return highlightLimits{o.maxItemHighlights, o.maxItemHighlightBytes}
}

// highlightBytes is what a highlight of segs and note counts against its
// item's bytes: the texts the member gave, not the item's title, URL and
// domain a highlight carries too (bounded by the item's own limits).
func highlightBytes(segs []HighlightSegment, note string) int {
	n := len(note)
	for _, s := range segs {
		n += len(s.XPath) + len(s.BeforeText) + len(s.AfterText) + len(s.Text)
	}
	return n
}

// unknownHighlightBytes is an item's hlBytes when its record does not
// hold them: written before they were kept.
const unknownHighlightBytes = -1

// itemHighlightBytes is the sum of highlightBytes over the item's
// highlights, read from them all.
func itemHighlightBytes(tx *storage.Tx, memberID, itemID string) (int, error) {
	n := 0
	err := eachItemHighlight(tx, memberID, itemID, func(h *Highlight) (bool, error) {
		n += highlightBytes(h.Segments, h.Note)
		return true, nil
	})
	return n, err
}

// knownHighlightBytes makes it.hlBytes known: those of an item whose
// record does not hold them are counted from its highlights, once, and
// the write of the item that needed them stores them (highlightsChanged).
func knownHighlightBytes(tx *storage.Tx, it *SavedItem) error {
	if it.hlBytes >= 0 {
		return nil
	}
	n, err := itemHighlightBytes(tx, it.MemberID, it.ID)
	if err != nil {
		return err
	}
	it.hlBytes = n
	return nil
}

// highlightsChanged is the change to an item's record of added more
// highlights (fewer when negative) holding grow more bytes (fewer), for
// touchItems, which reads the record again: read, when not nil, is the
// item as the transaction read it before, whose bytes knownHighlightBytes
// may have counted. Unknown bytes stay unknown (a highlight deleted from
// such an item reads no other), but an item left without highlights has
// none.
func highlightsChanged(read *SavedItem, added, grow int) func(*SavedItem) {
	return func(it *SavedItem) {
		it.HighlightCount = max(it.HighlightCount+added, 0)
		if it.hlBytes < 0 && read != nil {
			it.hlBytes = read.hlBytes
		}
		switch {
		case it.HighlightCount == 0:
			it.hlBytes = 0
		case it.hlBytes >= 0:
			it.hlBytes = max(it.hlBytes+grow, 0)
		}
	}
}

// tooManyHighlights is the refusal of a highlight past the count.
func (l highlightLimits) tooManyHighlights() error {
	return storage.Invalid("an item holds at most %d highlights", l.count)
}

// tooManyBytes is the refusal of a highlight or note past the bytes.
func (l highlightLimits) tooManyBytes() error {
	return storage.Invalid("an item's highlights and notes hold at most %s", byteSize(l.bytes))
}

// String says the limits for an import's report.
func (l highlightLimits) String() string {
	return fmt.Sprintf("an item holds at most %d highlights, of %s in all", l.count, byteSize(l.bytes))
}

func byteSize(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// room checks that it takes added new highlights (0 or 1) whose texts
// grow its highlights' bytes by grow, against the bytes its record keeps
// (counted once for a record without them: knownHighlightBytes).
func (l highlightLimits) room(tx *storage.Tx, it *SavedItem, added, grow int) error {
	if added > 0 && it.HighlightCount+added > l.count {
		return l.tooManyHighlights()
	}
	if grow <= 0 {
		return nil
	}
	if err := knownHighlightBytes(tx, it); err != nil {
		return err
	}
	if it.hlBytes+grow > l.bytes {
		return l.tooManyBytes()
	}
	return nil
}

package library

import (
	"context"
	"fmt"
	"unicode/utf8"

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
	// ten-thousandth of it (maxHighlightBytes), so the count alone would
	// let an item's highlights grow to gigabytes.
	MaxItemHighlightBytes = 32 << 20
)

// maxHighlightBytes is the most one highlight holds (highlightBytes),
// each character of its texts 4 bytes at most in UTF-8.
const maxHighlightBytes = utf8.UTFMax * (MaxSegments*(MaxXPathLen+2*MaxSegmentContext+MaxSegmentText) + MaxNoteLen)

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

// itemHighlightBytes is the sum of highlightBytes over the item's
// highlights.
func itemHighlightBytes(tx *storage.Tx, memberID, itemID string) (int, error) {
	n := 0
	err := eachItemHighlight(tx, memberID, itemID, func(h *Highlight) (bool, error) {
		n += highlightBytes(h.Segments, h.Note)
		return true, nil
	})
	return n, err
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
// grow its highlights' bytes by grow. It reads the item's highlights only
// when they may hold enough bytes to matter: an item with a few cannot
// reach the bytes, whatever they hold (maxHighlightBytes), and one with
// many costs what a page of them costs, once.
func (l highlightLimits) room(tx *storage.Tx, it *SavedItem, added, grow int) error {
	if added > 0 && it.HighlightCount+added > l.count {
		return l.tooManyHighlights()
	}
	if grow <= 0 || it.HighlightCount*maxHighlightBytes+grow <= l.bytes {
		return nil
	}
	have, err := itemHighlightBytes(tx, it.MemberID, it.ID)
	if err != nil {
		return err
	}
	if have+grow > l.bytes {
		return l.tooManyBytes()
	}
	return nil
}

// itemRoom is how many more bytes the item's highlights may take (room),
// for the placing of quotes, which grows them.
func (s Store) itemRoom(ctx context.Context, memberID, itemID string) (int, error) {
	l := s.state().opts.highlightLimits()
	room := l.bytes
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var it SavedItem
		if err := getItem(tx, itemKey(memberID, itemID), &it); err != nil {
			return err
		}
		if it.HighlightCount*maxHighlightBytes <= l.bytes {
			return nil // however they grow, they stay within the bytes
		}
		have, err := itemHighlightBytes(tx, memberID, itemID)
		room = l.bytes - have
		return err
	})
	return room, err
}

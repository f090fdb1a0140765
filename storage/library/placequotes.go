package library

import (
	"context"
	"errors"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Unplaced highlights: an import that brings a quote without the content
// to find it in (Pocket's annotations, Readwise's CSV) keeps it as one
// segment at the content's root ("/", offsets 0) holding the quote. Once a
// fetch brings the content, the quotes found there get their place.

// placeQuotesPerTx bounds the highlights one transaction rewrites.
const placeQuotesPerTx = 100

// Unplaced reports whether segs is a quote kept without a place.
func Unplaced(segs []HighlightSegment) bool {
	return len(segs) == 1 && segs[0].XPath == "/" && segs[0].StartOffset == 0 && segs[0].EndOffset == 0 && segs[0].Text != ""
}

// PlaceHighlights gives the item's unplaced highlights the segments place
// returns for their quote (nil, or an unplaced segment: left as it is),
// moving their updatedAt so that clients syncing highlights see them. It
// returns how many were placed.
func (s Store) PlaceHighlights(ctx context.Context, memberID, itemID string, place func(quote string) []HighlightSegment) (int, error) {
	hs, err := s.ItemHighlights(ctx, memberID, itemID)
	if err != nil {
		return 0, err
	}
	var todo []*Highlight
	for _, h := range hs {
		if Unplaced(h.Segments) {
			todo = append(todo, h)
		}
	}
	return s.placeEach(ctx, memberID, itemID, todo, place)
}

// PlaceHighlight is PlaceHighlights for h alone, a highlight a client has
// just made without a place: placing it looks for its quote only, not
// for every quote of the item still unplaced (a fetch of the item places
// those). It reports whether h was placed.
func (s Store) PlaceHighlight(ctx context.Context, memberID string, h *Highlight, place func(quote string) []HighlightSegment) (bool, error) {
	if !Unplaced(h.Segments) {
		return false, nil
	}
	n, err := s.placeEach(ctx, memberID, h.SavedItemID, []*Highlight{h}, place)
	return n > 0, err
}

// placeEach places the highlights of todo, the item's unplaced when read,
// in transactions of placeQuotesPerTx. A place holds more than the quote
// (its context, its path): the item's highlights' bytes grow, within
// their limit (highlightLimits), and a quote whose place does not fit
// stays unplaced. The item's record keeps the bytes; its updatedAt stays.
func (s Store) placeEach(ctx context.Context, memberID, itemID string, todo []*Highlight, place func(quote string) []HighlightSegment) (int, error) {
	limit := s.state().opts.maxItemHighlightBytes
	placed := 0
	for len(todo) > 0 {
		part := todo[:min(len(todo), placeQuotesPerTx)]
		todo = todo[len(part):]
		segs := make([][]HighlightSegment, len(part))
		for i, h := range part {
			if sg := place(h.Segments[0].Text); len(sg) > 0 && !Unplaced(sg) && validateSegments(sg) == nil {
				segs[i] = sg
			}
		}
		// Counted per attempt: a transaction that conflicts runs again.
		var n int
		err := s.st.Update(ctx, func(tx *storage.Tx) error {
			n = 0
			var was SavedItem
			if err := getItem(tx, itemKey(memberID, itemID), &was); errors.Is(err, storage.ErrNotFound) {
				return nil // deleted meanwhile, with its highlights
			} else if err != nil {
				return err
			}
			it := was
			if err := knownHighlightBytes(tx, &it); err != nil {
				return err
			}
			t := storage.Now()
			for i, old := range part {
				if segs[i] == nil {
					continue
				}
				var h Highlight
				if err := tx.GetJSON(highlightKey(memberID, old.ID), &h); err != nil {
					if errors.Is(err, storage.ErrNotFound) {
						continue // deleted meanwhile
					}
					return err
				}
				if !Unplaced(h.Segments) {
					continue // placed meanwhile, by the member or another node
				}
				grow := highlightBytes(segs[i], "") - highlightBytes(h.Segments, "")
				if it.hlBytes+grow > limit {
					continue
				}
				it.hlBytes += grow
				for _, k := range highlightIndexKeys(memberID, &h) {
					if err := tx.Delete(k); err != nil {
						return err
					}
				}
				h.Segments = nil
				for _, sg := range segs[i] {
					id, err := tx.NewID()
					if err != nil {
						return err
					}
					sg.ID = id
					h.Segments = append(h.Segments, sg)
				}
				if t.After(h.UpdatedAt) {
					h.UpdatedAt = t
				}
				if err := tx.PutJSON(highlightKey(memberID, h.ID), &h, 0); err != nil {
					return err
				}
				for _, k := range highlightIndexKeys(memberID, &h) {
					if err := tx.Put(k, nil, 0); err != nil {
						return err
					}
				}
				n++
			}
			if it.hlBytes == was.hlBytes {
				return nil
			}
			return writeItem(tx, itemChange{old: &was, it: &it})
		})
		if err != nil {
			return placed, err
		}
		placed += n
	}
	return placed, nil
}

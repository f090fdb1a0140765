package library

import (
	"context"
	"errors"

	"github.com/hearthkit/caddy-hearth/storage"
)

// What the library pages (handlers/reader) keep beyond the API's records:
// the member's text settings, under u/<member>/gql/rp, and the note of a
// highlight changed in place.

func readerPrefsKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "rp") }

// ReaderPrefs are a member's text settings in the reader. Each is a step
// on the reader's own scale; 0 is the reader's default.
type ReaderPrefs struct {
	Size   int    `json:"size,omitempty"`   // text size
	Width  int    `json:"width,omitempty"`  // line width
	Height int    `json:"height,omitempty"` // line height
	Font   string `json:"font,omitempty"`   // "serif" or "" (sans)
	Theme  string `json:"theme,omitempty"`  // "light", "dark" or "" (the system's)
}

// MaxReaderPrefStep bounds the steps of ReaderPrefs.
const MaxReaderPrefStep = 5

// ReaderPrefs returns the member's text settings (zero when never set).
func (s Store) ReaderPrefs(ctx context.Context, memberID string) (ReaderPrefs, error) {
	var p ReaderPrefs
	err := s.st.View(ctx, func(tx *storage.Tx) error { return tx.GetJSON(readerPrefsKey(memberID), &p) })
	if errors.Is(err, storage.ErrNotFound) {
		err = nil
	}
	return p, err
}

// SetReaderPrefs keeps the member's text settings.
func (s Store) SetReaderPrefs(ctx context.Context, memberID string, p ReaderPrefs) error {
	for _, v := range []int{p.Size, p.Width, p.Height} {
		if v < 0 || v > MaxReaderPrefStep {
			return storage.Invalid("text settings are steps from 0 to %d", MaxReaderPrefStep)
		}
	}
	if p.Font != "" && p.Font != "serif" {
		return storage.Invalid("font is serif or the default")
	}
	if p.Theme != "" && p.Theme != "light" && p.Theme != "dark" {
		return storage.Invalid("theme is light, dark or the system's")
	}
	return s.st.Update(ctx, func(tx *storage.Tx) error { return tx.PutJSON(readerPrefsKey(memberID), &p, 0) })
}

// SetHighlightNote changes the note of one of the member's highlights,
// moving its updatedAt and its item's (so incremental sync sees it);
// storage.ErrNotFound for one of an item a pending emptying of the trash
// is to delete. A longer note must fit the item's highlights' bytes
// (highlightLimits).
func (s Store) SetHighlightNote(ctx context.Context, memberID, id, note string) (*Highlight, error) {
	note, err := cleanText(note, MaxNoteLen, "note")
	if err != nil {
		return nil, err
	}
	var h Highlight
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		if err := getClientHighlight(tx, memberID, id, &h); err != nil {
			return err
		}
		var it *SavedItem
		if grow := len(note) - len(h.Note); grow > 0 {
			it = new(SavedItem)
			if err := getItem(tx, itemKey(memberID, h.SavedItemID), it); err != nil {
				return err
			}
			if err := s.state().opts.highlightLimits().room(tx, it, 0, grow); err != nil {
				return err
			}
		}
		return putHighlightNote(tx, memberID, it, &h, note)
	})
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// putHighlightNote gives h the (cleaned) note, moving its updatedAt and its
// item's, whose bytes it keeps (highlightsChanged: it is the item as read
// before, or nil).
func putHighlightNote(tx *storage.Tx, memberID string, it *SavedItem, h *Highlight, note string) error {
	grow := len(note) - len(h.Note)
	if err := writeHighlightNote(tx, memberID, h, note); err != nil {
		return err
	}
	return touchItems(tx, memberID, []string{h.SavedItemID}, highlightsChanged(it, 0, grow))
}

// writeHighlightNote gives h the (cleaned) note, moving its updatedAt, and
// leaves its item to the caller (an import writes the item itself).
func writeHighlightNote(tx *storage.Tx, memberID string, h *Highlight, note string) error {
	old := highlightIndexKeys(memberID, h)[1]
	h.Note = note
	if t := storage.Now(); t.After(h.UpdatedAt) {
		h.UpdatedAt = t
	}
	if err := tx.Delete(old); err != nil {
		return err
	}
	if err := tx.Put(highlightIndexKeys(memberID, h)[1], nil, 0); err != nil {
		return err
	}
	return tx.PutJSON(highlightKey(memberID, h.ID), h, 0)
}

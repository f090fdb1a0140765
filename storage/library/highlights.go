package library

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Highlights, under u/<member>/gql/:
//
//	hl/<id>                   Highlight
//	ih/<item id>/<id>         empty: the highlights of an item
//	hx/<field>/<sort><id>     empty: ordered index by createdAt (c) or updatedAt (u)

// Highlight is a passage of a saved item marked by the member or, without
// segments, the member's note on the item as a whole (IsNote).
type Highlight struct {
	ID          string             `json:"id"`
	SavedItemID string             `json:"saved_item_id"`
	ItemTitle   string             `json:"item_title"`
	ItemURL     string             `json:"item_url,omitempty"`
	ItemDomain  string             `json:"item_domain,omitempty"`
	Note        string             `json:"note,omitempty"`
	Segments    []HighlightSegment `json:"segments"`
	// PositionPercent is where the highlight starts in the item's text,
	// from 0 (its start) to 100, as Omnivore's highlightPositionPercent
	// (which its reader measures down the page): 0 when the text was not
	// there to look in (an import, a page not fetched yet).
	PositionPercent float64   `json:"position_percent,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// HighlightSegment locates one stretch of highlighted text in the item's
// content (a highlight across several elements has several segments).
type HighlightSegment struct {
	ID          string `json:"id"`
	XPath       string `json:"xpath"`
	BeforeText  string `json:"before_text"`
	AfterText   string `json:"after_text"`
	StartOffset int    `json:"start_offset"`
	EndOffset   int    `json:"end_offset"`
	Text        string `json:"text,omitempty"`
}

// Limits on highlights.
const (
	MaxSegments       = 50
	MaxSegmentText    = 10000
	MaxSegmentContext = 1000
	MaxXPathLen       = 2000
	MaxNoteLen        = 10000
)

func highlightKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "hl", id) }
func itemHighlightKey(memberID, itemID, id string) []byte {
	return storage.Key("u", memberID, "gql", "ih", itemID, id)
}
func highlightIndexPrefix(memberID string, f SortField) []byte {
	return storage.Key("u", memberID, "gql", "hx", sortFieldCode[f], "")
}

// ValidHighlightSortField reports whether highlights can be sorted by f.
func ValidHighlightSortField(f SortField) bool { return f == SortCreatedAt || f == SortUpdatedAt }

func highlightIndexKeys(memberID string, h *Highlight) [][]byte {
	id := idBytes(h.ID)
	return [][]byte{
		encUint64(encTime(highlightIndexPrefix(memberID, SortCreatedAt), h.CreatedAt), id),
		encUint64(encTime(highlightIndexPrefix(memberID, SortUpdatedAt), h.UpdatedAt), id),
	}
}

func validateSegments(segs []HighlightSegment) error {
	if len(segs) == 0 || len(segs) > MaxSegments {
		return storage.Invalid("a highlight has 1 to %d segments", MaxSegments)
	}
	for _, s := range segs {
		if !utf8.ValidString(s.XPath + s.BeforeText + s.AfterText + s.Text) {
			return storage.Invalid("segments must be valid UTF-8")
		}
		// Limits count characters (code points), as their messages say.
		if utf8.RuneCountInString(s.XPath) > MaxXPathLen || s.XPath == "" {
			return storage.Invalid("xpath must be 1 to %d characters", MaxXPathLen)
		}
		if utf8.RuneCountInString(s.BeforeText) > MaxSegmentContext || utf8.RuneCountInString(s.AfterText) > MaxSegmentContext {
			return storage.Invalid("beforeText and afterText must be at most %d characters", MaxSegmentContext)
		}
		if utf8.RuneCountInString(s.Text) > MaxSegmentText {
			return storage.Invalid("segment text must be at most %d characters", MaxSegmentText)
		}
		if s.StartOffset < 0 || s.EndOffset < s.StartOffset {
			return storage.Invalid("offsets must satisfy 0 <= startOffset <= endOffset")
		}
	}
	return nil
}

// CreateHighlight adds a highlight to one of the member's items and moves
// the item's updatedAt (storage.ErrNotFound for an item a pending emptying
// of the trash is to delete; storage.InvalidError past the item's
// highlights' limits, highlightLimits).
func (s Store) CreateHighlight(ctx context.Context, memberID, itemID string, segs []HighlightSegment, note string) (*Highlight, error) {
	if err := validateSegments(segs); err != nil {
		return nil, err
	}
	note, err := cleanText(note, MaxNoteLen, "note")
	if err != nil {
		return nil, err
	}
	var out *Highlight
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		var it SavedItem
		if err := getClientItem(tx, memberID, itemID, &it); err != nil {
			return err
		}
		size := highlightBytes(segs, note)
		if err := s.state().opts.highlightLimits().room(tx, &it, 1, size); err != nil {
			return err
		}
		t := storage.Now()
		pct, err := positionPercent(tx, memberID, itemID, segs)
		if err != nil {
			return err
		}
		h, err := putNewHighlight(tx, &it, segs, note, t, t, pct)
		if err != nil {
			return err
		}
		out = h
		return touchItems(tx, memberID, []string{itemID}, highlightsChanged(&it, 1, size))
	})
	return out, err
}

// AddNote adds text to the member's note on one of their items as a
// whole: a highlight without segments (IsNote), as Omnivore's highlights
// of type NOTE are. An item has one note: the first text makes it, and
// each later one is added to it after a blank line, as Omnivore's browser
// extension meant its "Add note" to add to the note there was
// (addNoteToLibraryItem in its background script). It moves the item's
// updatedAt. The note counts against the item's highlights' limits
// (highlightLimits) as a highlight.
func (s Store) AddNote(ctx context.Context, memberID, itemID, text string) (*Highlight, error) {
	text, err := cleanText(text, MaxNoteLen, "note")
	if err != nil {
		return nil, err
	}
	if text == "" {
		return nil, storage.Invalid("a note needs text")
	}
	var out *Highlight
	err = s.st.Update(ctx, func(tx *storage.Tx) error {
		var it SavedItem
		if err := getClientItem(tx, memberID, itemID, &it); err != nil {
			return err
		}
		note, err := itemNote(tx, memberID, itemID)
		if err != nil {
			return err
		}
		lim := s.state().opts.highlightLimits()
		if note != nil {
			joined, err := joinNote(note.Note, text)
			if err != nil {
				return err
			}
			if err := lim.room(tx, &it, 0, len(joined)-len(note.Note)); err != nil {
				return err
			}
			out = note
			return putHighlightNote(tx, memberID, &it, note, joined)
		}
		size := highlightBytes(nil, text)
		if err := lim.room(tx, &it, 1, size); err != nil {
			return err
		}
		t := storage.Now()
		if out, err = putNewHighlight(tx, &it, nil, text, t, t, 0); err != nil {
			return err
		}
		return touchItems(tx, memberID, []string{itemID}, highlightsChanged(&it, 1, size))
	})
	return out, err
}

// joinNote is the note with text added after a blank line: how an item's
// one note takes each later text (AddNote, an import's note for an item
// that has one).
func joinNote(note, text string) (string, error) {
	return cleanText(note+"\n\n"+text, MaxNoteLen, "note")
}

// noteHolds reports whether note holds text already, white space aside:
// as a run of its whole paragraphs (all of them, or those joinNote added
// with text, of one paragraph or several), so that importing a file again
// adds nothing to the note.
func noteHolds(note, text string) bool {
	want := strings.Fields(text)
	if len(want) == 0 {
		return true
	}
	paras := noteParagraphs(note)
	for i := range paras {
		if holdsFrom(paras[i:], want) {
			return true
		}
	}
	return false
}

// holdsFrom reports whether the words of the first paragraphs of paras,
// a whole number of them, are want.
func holdsFrom(paras [][]string, want []string) bool {
	for _, p := range paras {
		if len(p) > len(want) || !slices.Equal(p, want[:len(p)]) {
			return false
		}
		if want = want[len(p):]; len(want) == 0 {
			return true
		}
	}
	return false
}

// noteParagraphs are the words of each paragraph of note (paragraphs
// parted by blank lines, as joinNote parts them).
func noteParagraphs(note string) [][]string {
	var paras [][]string
	var cur []string
	for line := range strings.Lines(note) {
		words := strings.Fields(line)
		if len(words) == 0 {
			if len(cur) > 0 {
				paras = append(paras, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, words...)
	}
	if len(cur) > 0 {
		paras = append(paras, cur)
	}
	return paras
}

// itemNote is the item's note (the first of its highlights without
// segments), or nil.
func itemNote(tx *storage.Tx, memberID, itemID string) (*Highlight, error) {
	var note *Highlight
	err := eachItemHighlight(tx, memberID, itemID, func(h *Highlight) (bool, error) {
		if h.IsNote() {
			note = h
			return false, nil
		}
		return true, nil
	})
	return note, err
}

// eachItemHighlight calls fn with each highlight of the item, oldest
// first, while it answers true.
func eachItemHighlight(tx *storage.Tx, memberID, itemID string, fn func(h *Highlight) (bool, error)) error {
	prefix := itemHighlightKey(memberID, itemID, "")
	return tx.Scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
		h := new(Highlight)
		err := tx.GetJSON(highlightKey(memberID, string(k[len(prefix):])), h)
		if errors.Is(err, storage.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return fn(h)
	})
}

// IsNote reports whether h is a note on its item as a whole (AddNote)
// rather than on a passage.
func (h *Highlight) IsNote() bool { return len(h.Segments) == 0 }

// putNewHighlight writes a new highlight of it (validated segments and
// note) with its keys; the caller counts it in it.HighlightCount and its
// bytes (highlightsChanged).
func putNewHighlight(tx *storage.Tx, it *SavedItem, segs []HighlightSegment, note string, created, updated time.Time, pct float64) (*Highlight, error) {
	memberID := it.MemberID
	id, err := tx.FreshID(func(id string) []byte { return highlightKey(memberID, id) })
	if err != nil {
		return nil, err
	}
	h := &Highlight{ID: id, SavedItemID: it.ID, ItemTitle: it.Title, ItemURL: it.OriginalURL,
		ItemDomain: it.SourceDomain, Note: note, PositionPercent: pct, CreatedAt: created, UpdatedAt: updated}
	for _, sg := range segs {
		if sg.ID, err = tx.NewID(); err != nil {
			return nil, err
		}
		h.Segments = append(h.Segments, sg)
	}
	if err := tx.PutJSON(highlightKey(memberID, h.ID), h, 0); err != nil {
		return nil, err
	}
	if err := tx.Put(itemHighlightKey(memberID, it.ID, h.ID), nil, 0); err != nil {
		return nil, err
	}
	for _, k := range highlightIndexKeys(memberID, h) {
		if err := tx.Put(k, nil, 0); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// positionPercent is where the first segment's text starts in the item's
// text, in percent of its length (found with the text before it when that
// tells two places apart); 0 when the item has no text or the passage is
// not found in it.
func positionPercent(tx *storage.Tx, memberID, itemID string, segs []HighlightSegment) (float64, error) {
	if len(segs) == 0 || segs[0].Text == "" {
		return 0, nil
	}
	var c ItemContent
	if err := tx.GetJSON(contentKey(memberID, itemID), &c); errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	return percentIn(c.Text, segs), nil
}

// percentIn is positionPercent in text.
func percentIn(text string, segs []HighlightSegment) float64 {
	if len(segs) == 0 || segs[0].Text == "" || text == "" {
		return 0
	}
	at := -1
	if sg := segs[0]; sg.BeforeText != "" {
		if i := strings.Index(text, sg.BeforeText+sg.Text); i >= 0 {
			at = i + len(sg.BeforeText)
		}
	}
	if at < 0 {
		at = strings.Index(text, segs[0].Text)
	}
	if at < 0 {
		return 0
	}
	return math.Round(float64(at)*10000/float64(len(text))) / 100
}

func cleanText(s string, max int, what string) (string, error) {
	if !utf8.ValidString(s) {
		return "", storage.Invalid("%s must be valid UTF-8", what)
	}
	if utf8.RuneCountInString(s) > max {
		return "", storage.Invalid("%s must be at most %d characters", what, max)
	}
	return strings.TrimSpace(s), nil
}

func deleteHighlight(tx *storage.Tx, memberID string, h *Highlight) error {
	for _, k := range highlightIndexKeys(memberID, h) {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	if err := tx.Delete(itemHighlightKey(memberID, h.SavedItemID, h.ID)); err != nil {
		return err
	}
	return tx.Delete(highlightKey(memberID, h.ID))
}

// DeleteHighlights removes highlights of the member; unknown ids (and
// those of an item a pending emptying of the trash is to delete) are
// storage.ErrNotFound and nothing is deleted. A repeated id counts once.
func (s Store) DeleteHighlights(ctx context.Context, memberID string, ids []string) error {
	if len(ids) == 0 || len(ids) > MaxBatchIDs {
		return storage.Invalid("items must hold 1 to %d highlights", MaxBatchIDs)
	}
	seen := make(map[string]bool, len(ids))
	unique := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	return s.st.Update(ctx, func(tx *storage.Tx) error {
		for _, id := range unique {
			var h Highlight
			if err := getClientHighlight(tx, memberID, id, &h); err != nil {
				return err
			}
			if err := deleteHighlight(tx, memberID, &h); err != nil {
				return err
			}
			err := touchItems(tx, memberID, []string{h.SavedItemID}, highlightsChanged(nil, -1, -highlightBytes(h.Segments, h.Note)))
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func deleteItemHighlights(tx *storage.Tx, memberID, itemID string) error {
	prefix := storage.Key("u", memberID, "gql", "ih", itemID, "")
	ids, err := tx.Suffixes(prefix)
	if err != nil {
		return err
	}
	for _, id := range ids {
		var h Highlight
		err := tx.GetJSON(highlightKey(memberID, id), &h)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := deleteHighlight(tx, memberID, &h); err != nil {
			return err
		}
	}
	return nil
}

// Highlight returns one of the member's highlights (storage.ErrNotFound
// for one of an item a pending emptying of the trash is to delete).
func (s Store) Highlight(ctx context.Context, memberID, id string) (*Highlight, error) {
	var h Highlight
	err := s.st.View(ctx, func(tx *storage.Tx) error { return getClientHighlight(tx, memberID, id, &h) })
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// ItemHighlights lists the highlights of an item, oldest first.
func (s Store) ItemHighlights(ctx context.Context, memberID, itemID string) ([]*Highlight, error) {
	var out []*Highlight
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		return eachItemHighlight(tx, memberID, itemID, func(h *Highlight) (bool, error) {
			out = append(out, h)
			return true, nil
		})
	})
	return out, err
}

// HighlightPage is one page of highlights.
type HighlightPage struct {
	Highlights []*Highlight
	Cursors    []string
	HasNext    bool
	end        string // as ItemPage's
}

// NextAfter is the cursor the next page starts after, as ItemPage's.
func (p *HighlightPage) NextAfter() string { return nextAfter(p.HasNext, p.Cursors, p.end) }

// HighlightsPage returns one page of the member's highlights matching f,
// sorted by createdAt, updatedAt or their item's title, as Inboxt's
// highlight query (highlight.service.ts getPaginated, Inboxt/inboxt@45f4314):
// f.Text matches the item's title, description or content (and, in
// Hearth, the highlight's note and text), f.Site is a substring of the
// item's domain, f.SavedFrom/SavedTo bound the item's saved time, and
// f.UpdatedFrom/UpdatedTo the highlight's updatedAt. p.After is a cursor of
// a previous page or a highlight id (Inboxt's cursor).
func (s Store) HighlightsPage(ctx context.Context, memberID string, f ItemFilter, p PageRequest) (*HighlightPage, error) {
	return s.highlightsPage(ctx, memberID, f, p, false)
}

// highlightsPage is HighlightsPage; byStatus has a page sorted by title
// walk the status indexes whether or not the member's title keys are
// there (the tests compare both walks' pages).
func (s Store) highlightsPage(ctx context.Context, memberID string, f ItemFilter, p PageRequest, byStatus bool) (*HighlightPage, error) {
	if !ValidHighlightSortField(p.Field) && p.Field != SortTitle {
		return nil, storage.Invalid("highlights can be sorted by createdAt, updatedAt or title only")
	}
	first, limit := max(p.First, 0), s.state().opts.maxHiddenPassed
	text := strings.ToLower(strings.TrimSpace(f.Text))
	site := strings.ToLower(f.Site)
	page := &HighlightPage{}
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		after, err := highlightAfter(tx, memberID, p)
		if err != nil {
			return err
		}
		cut, err := readEmptyingCut(tx, memberID)
		if err != nil {
			return err
		}
		hf := &highlightFilter{tx: tx, memberID: memberID, f: f, text: text, site: site, cut: cut}
		keep := hf.keep
		var found []*Highlight
		var sufs [][]byte
		// Past maxHiddenPassed highlights (sorted by title: items) that a
		// pending emptying hides.
		var short cutShort
		add := func(h *Highlight, suf []byte) {
			found = append(found, h)
			sufs = append(sufs, suf)
		}
		if p.Field != SortTitle {
			prefix := highlightIndexPrefix(memberID, p.Field)
			err := keyset{prefix: prefix, desc: p.Desc, after: after}.scan(tx, func(suf, _ []byte) (bool, error) {
				id := strconv.FormatUint(binary.BigEndian.Uint64(suf[len(suf)-8:]), 10)
				var h Highlight
				if err := tx.GetJSON(highlightKey(memberID, id), &h); err != nil {
					if errors.Is(err, storage.ErrNotFound) {
						return true, nil
					}
					return false, err
				}
				ok, err := keep(&h)
				if err != nil || !ok {
					return err == nil && !(hf.hidden && short.pass(suf, limit)), err
				}
				add(&h, append([]byte(nil), suf...))
				return len(found) <= first, nil
			})
			if err != nil {
				return err
			}
		} else if err := hf.byTitle(p.Desc, after, first, limit, &short, add, byStatus); err != nil {
			return err
		}
		page.Highlights, page.Cursors, page.HasNext, page.end = cutPageAt(&short, found, sufs, first, 2, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// highlightAfter is the index key suffix a page of highlights starts
// after: the cursor's, or that of the highlight whose id it is.
func highlightAfter(tx *storage.Tx, memberID string, p PageRequest) ([]byte, error) {
	if p.After == "" {
		return nil, nil
	}
	a, err := parseCursor(p.After, 2, p.Field, p.Desc)
	if err == nil || !storage.IsID(p.After) {
		return a, err
	}
	var h Highlight
	if gerr := tx.GetJSON(highlightKey(memberID, p.After), &h); errors.Is(gerr, storage.ErrNotFound) {
		return nil, storage.Invalid("after: no highlight has the id %s", p.After)
	} else if gerr != nil {
		return nil, gerr
	}
	if p.Field != SortTitle {
		return highlightSortValue(&h, p.Field), nil
	}
	var it SavedItem
	if err := getItem(tx, itemKey(memberID, h.SavedItemID), &it); err != nil {
		return nil, err
	}
	return encUint64(itemSortValue(&it, SortTitle), idBytes(h.ID)), nil
}

// highlightFilter selects highlights by ItemFilter's fields that apply to
// them, reading the highlight's item when a filter needs it (one at a
// time: an item's highlights often follow each other).
type highlightFilter struct {
	tx         *storage.Tx
	memberID   string
	f          ItemFilter
	text, site string // lower case
	cur        SavedItem
	curContent *ItemContent
	// cut is the member's pending emptying of the trash: the highlights
	// of its items are left out (their items read only while it is);
	// hidden is whether keep left the last highlight out for it.
	cut    emptyingCut
	hidden bool
}

func (hf *highlightFilter) itemOf(id string) (*SavedItem, error) {
	if hf.cur.ID == id && id != "" {
		return &hf.cur, nil
	}
	hf.cur, hf.curContent = SavedItem{}, nil
	if err := getItem(hf.tx, itemKey(hf.memberID, id), &hf.cur); err != nil {
		return nil, err
	}
	return &hf.cur, nil
}

// keep reports whether the filter selects h.
func (hf *highlightFilter) keep(h *Highlight) (bool, error) {
	f, text := hf.f, hf.text
	hf.hidden = false
	if f.UpdatedFrom != nil && h.UpdatedAt.Before(*f.UpdatedFrom) ||
		f.UpdatedTo != nil && !h.UpdatedAt.Before(*f.UpdatedTo) {
		return false, nil
	}
	if hf.site != "" && !containsFold(h.ItemDomain, hf.site) {
		return false, nil
	}
	if hf.cut.pending {
		if it, err := hf.itemOf(h.SavedItemID); err != nil || hf.cut.hides(it) {
			if errors.Is(err, storage.ErrNotFound) {
				err = nil
			}
			hf.hidden = err == nil
			return false, err
		}
	}
	if text == "" && f.SavedFrom == nil && f.SavedTo == nil {
		return true, nil
	}
	it, err := hf.itemOf(h.SavedItemID)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if f.SavedFrom != nil && it.CreatedAt.Before(*f.SavedFrom) ||
		f.SavedTo != nil && !it.CreatedAt.Before(*f.SavedTo) {
		return false, nil
	}
	if text == "" {
		return true, nil
	}
	if containsFold(it.Title, text) || containsFold(it.Description, text) || containsFold(h.Note, text) {
		return true, nil
	}
	for _, sg := range h.Segments {
		if containsFold(sg.Text, text) {
			return true, nil
		}
	}
	if hf.curContent == nil {
		hf.curContent = &ItemContent{}
		if err := hf.tx.GetJSON(contentKey(hf.memberID, it.ID), hf.curContent); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return false, err
		}
	}
	return containsFold(hf.curContent.Text, text), nil
}

func highlightSortValue(h *Highlight, f SortField) []byte {
	t := h.CreatedAt
	if f == SortUpdatedAt {
		t = h.UpdatedAt
	}
	return encUint64(encTime(nil, t), idBytes(h.ID))
}

// ForEachHighlight calls fn for every highlight of the member, oldest
// first, from one snapshot (for exports), but those of the items a pending
// emptying of the trash is to delete (as ForEachSavedItem leaves the items
// out).
func (s Store) ForEachHighlight(ctx context.Context, memberID string, fn func(h *Highlight) error) error {
	return s.st.View(ctx, func(tx *storage.Tx) error {
		cut, err := readEmptyingCut(tx, memberID)
		if err != nil {
			return err
		}
		hf := &highlightFilter{tx: tx, memberID: memberID, cut: cut}
		return tx.Scan(storage.Key("u", memberID, "gql", "hl", ""), nil, false, false, func(_, v []byte) (bool, error) {
			var h Highlight
			if err := json.Unmarshal(v, &h); err != nil {
				return false, err
			}
			if ok, err := hf.keep(&h); err != nil || !ok {
				return err == nil, err
			}
			return true, fn(&h)
		})
	})
}

package library

import (
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
)

// The match of an item against a filter, and the search budget.

type itemMatcher struct {
	tx         *storage.Tx
	memberID   string
	f          ItemFilter
	labelsAll  [][]string // label ids
	labelsNot  []string
	impossible bool
	needle     []byte // the case-folded free text (FoldText), nil for none
	// examined and verified count the items match looked at, and the
	// texts among them it read (for the search budget).
	examined, verified int
	// prefilter, when set, holds every item that can match (from the
	// filters' keys): the scan along the sort order skips the others by
	// their key, without decoding their record.
	prefilter map[uint64]struct{}
	// ordered, when set, is a plan that walks one filter's ordered keys
	// (orderedPage) instead of the statuses' indexes.
	ordered *searchPlan
	// textFilter, when set, tells the items whose text cannot hold the
	// needle (by the text index), which are not read.
	textFilter *textindex.Filter
	// words, when set, tells of some items whether their text holds the
	// needle, as verified in the same state of the text index, and keeps
	// what match verifies (wordCache).
	words *wordLookup
	// readyKnown and ready: whether the member's index is built, read
	// when a scan first passes the budget.
	readyKnown, ready bool
	// cut is the member's pending emptying of the trash, read once for a
	// page that lists the trash: its items match nothing.
	cut emptyingCut
}

// overBudget reports whether the scan has passed the search budget, which
// applies once the member's index is built (before, searches scan as they
// always did).
func (m *itemMatcher) overBudget() (bool, error) {
	if m.examined <= maxExamined && m.verified <= maxVerified {
		return false, nil
	}
	if !m.readyKnown {
		r, err := searchReady(m.tx, m.memberID)
		if err != nil {
			return false, err
		}
		m.readyKnown, m.ready = true, r
	}
	return m.ready, nil
}

// matchWithinBudget is match, failing with ErrSearchTooBroad once the
// search has gone over its budget (overBudget).
func (m *itemMatcher) matchWithinBudget(it *SavedItem) (bool, error) {
	ok, err := m.match(it)
	if err != nil {
		return false, err
	}
	if over, err := m.overBudget(); err != nil {
		return false, err
	} else if over {
		return false, ErrSearchTooBroad
	}
	return ok, nil
}

// newItemMatcher is the matcher of f, reading the member's labels (for
// label filters) through lists (listsCache).
func newItemMatcher(tx *storage.Tx, memberID string, f ItemFilter, lists *listsLookup) (*itemMatcher, error) {
	m := &itemMatcher{tx: tx, memberID: memberID, f: f}
	if f.Status == StatusDeleted || f.Status == StatusAll {
		cut, err := readEmptyingCut(tx, memberID)
		if err != nil {
			return nil, err
		}
		m.cut = cut
	}
	if t := strings.TrimSpace(f.Text); t != "" {
		m.needle = textindex.AppendFold(nil, t)
	}
	if len(f.LabelsAll) > 0 || len(f.LabelsNot) > 0 {
		ls, err := lists.read(tx, memberID)
		if err != nil {
			return nil, err
		}
		byName := map[string][]string{}
		for _, l := range ls.labels {
			n := labelNameFold(l.Name)
			byName[n] = append(byName[n], l.ID)
		}
		for _, group := range f.LabelsAll {
			var ids []string
			for _, name := range group {
				ids = append(ids, byName[labelNameFold(name)]...)
			}
			if len(ids) == 0 {
				m.impossible = true
			}
			m.labelsAll = append(m.labelsAll, ids)
		}
		for _, name := range f.LabelsNot {
			m.labelsNot = append(m.labelsNot, byName[labelNameFold(name)]...)
		}
	}
	return m, nil
}

func (m *itemMatcher) match(it *SavedItem) (bool, error) {
	if m.cut.hides(it) {
		// Deleted for the member, which the trash's page passes over
		// while the emptying lasts: not counted in the search budget (so
		// that they do not end a search early with few results); the
		// walks along an index bound them apart (cutShort).
		return false, nil
	}
	m.examined++
	if !m.matchFields(it) {
		return false, nil
	}
	if m.needle != nil {
		return m.matchText(it)
	}
	return true, nil
}

// matchFields reports whether it passes every part of the filter but its
// free text: what its record tells.
func (m *itemMatcher) matchFields(it *SavedItem) bool {
	f := m.f
	if m.impossible || m.cut.hides(it) {
		return false
	}
	if f.Type != "" && it.Type != f.Type {
		return false
	}
	for _, group := range m.labelsAll {
		found := false
		for _, id := range group {
			if contains(it.LabelIDs, id) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for _, id := range m.labelsNot {
		if contains(it.LabelIDs, id) {
			return false
		}
	}
	if f.HasHighlights != nil && (it.HighlightCount > 0) != *f.HasHighlights {
		return false
	}
	if f.NoLabels != nil && (len(it.LabelIDs) == 0) != *f.NoLabels {
		return false
	}
	if f.SavedFrom != nil && it.CreatedAt.Before(*f.SavedFrom) {
		return false
	}
	if f.SavedTo != nil && !it.CreatedAt.Before(*f.SavedTo) {
		return false
	}
	if f.UpdatedFrom != nil && it.UpdatedAt.Before(*f.UpdatedFrom) {
		return false
	}
	if f.UpdatedTo != nil && !it.UpdatedAt.Before(*f.UpdatedTo) {
		return false
	}
	if f.Site != "" {
		// A substring of the domain, as Inboxt's sourceDomain contains
		// (saved-item.service.ts getPaginated, Inboxt/inboxt@45f4314).
		if !containsFold(it.SourceDomain, strings.ToLower(f.Site)) {
			return false
		}
	}
	if f.ProgressFrom != nil && it.ReadingProgress < *f.ProgressFrom {
		return false
	}
	if f.ProgressTo != nil && it.ReadingProgress > *f.ProgressTo {
		return false
	}
	minutes := (it.WordCount + 199) / 200
	if f.MinutesFrom != nil && minutes < *f.MinutesFrom {
		return false
	}
	if f.MinutesTo != nil && minutes > *f.MinutesTo {
		return false
	}
	return true
}

// matchText reports whether the text of it holds the needle (by the word
// cache's verdict, the index's filter, or its text read).
func (m *itemMatcher) matchText(it *SavedItem) (bool, error) {
	id := idBytes(it.ID)
	if v, ok := m.words.known(id); ok {
		if v != verdictFiltered {
			m.verified++ // in the budget as when read: the same answers
		}
		return v == verdictHolds, nil
	}
	if out, err := m.filteredOut(it.ID); err != nil || out {
		return false, err
	}
	m.verified++
	holds, err := itemTextContains(m.tx, it, m.needle)
	if err == nil {
		v := verdictLacks
		if holds {
			v = verdictHolds
		}
		m.words.note(id, v)
	}
	return holds, err
}

// filteredOut reports whether the text index's filter rules out the text
// of item id (noted in the word cache), reading the filter of a result the
// word cache kept when the search has none yet.
func (m *itemMatcher) filteredOut(id string) (bool, error) {
	if m.textFilter == nil {
		var err error
		if m.textFilter, err = m.words.filterFor(m.tx, m.memberID, m.needle); err != nil || m.textFilter == nil {
			return false, err
		}
	}
	may, err := m.textFilter.May(m.tx, id)
	if err != nil || may {
		return false, err
	}
	m.words.note(idBytes(id), verdictFiltered)
	return true, nil
}

// textRuledOut reports whether the text index rules out the text of item
// id, by the word cache's verdict or the index's filter (which the match of
// the item would read; a failed read leaves the item to it).
func (m *itemMatcher) textRuledOut(id uint64) bool {
	if v, ok := m.words.known(id); ok {
		return v == verdictFiltered
	}
	out, err := m.filteredOut(strconv.FormatUint(id, 10))
	return err == nil && out
}

// indexable reports whether a search index can narrow the filter: free
// text, or a filter with keys of its own.
func (m *itemMatcher) indexable() bool {
	f := m.f
	return m.needle != nil || len(m.labelsAll) > 0 || f.Site != "" || f.Type != "" ||
		(f.HasHighlights != nil && *f.HasHighlights) || f.SavedFrom != nil || f.SavedTo != nil ||
		f.UpdatedFrom != nil || f.UpdatedTo != nil
}

// containsFold reports whether s contains the lower-case needle, ignoring case.
func containsFold(s, needle string) bool {
	return strings.Contains(strings.ToLower(s), needle)
}

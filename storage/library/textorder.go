package library

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/hearthkit/caddy-hearth/storage"
)

// A word's page in the order of creation, from the text index's
// candidates newest (or oldest) first: each segment of the index keeps the
// bounds of its items' createdAt (textOrder), so the page reads the
// candidates of the segments that may hold the newest items, verifies
// their texts in the page's order, and stops as soon as it has its items
// and the segments left cannot hold one that comes earlier. Right after a
// store is opened this reads the candidates of a few small segments and
// about a page of texts, where the walk along the order read every item
// it passed, asking the index's filter of each (bench/README.md "The
// first requests after opening a store").

// textOrdered reports whether the page can be read by textOrderedPage:
// the first page of free text in the order of creation, and no filter
// with keys of its own (whose plans read fewer items). The pages after it
// take the planner's plans, which the word cache helps (wordCache: what
// the first page verified, the index's answer).
func (q *pageQuery) textOrdered() bool {
	m, f := q.m, q.f
	return len(m.needle) >= 3 && q.p.Field == SortCreatedAt && q.after == nil && len(m.labelsAll) == 0 && f.Site == "" && f.Type == "" &&
		(f.HasHighlights == nil || !*f.HasHighlights) && f.UpdatedFrom == nil && f.UpdatedTo == nil
}

// orderedHit is an item read by textOrderedPage: its record and its key
// suffix in the order of creation.
type orderedHit struct {
	it  *SavedItem
	suf []byte
}

// textOrderedPage fills page from the text index's candidates in the
// order of creation (textindex.OrderedReader), or reports false, having
// filled nothing, when the index cannot tell (its bounds not measured yet
// after an upgrade, more texts queued than the page may read) or the page
// would read more than the candidate limit: the plans of searchCandidates
// then (or when the word cache holds the word's result: they read it).
func (q *pageQuery) textOrderedPage(page *ItemPage) (bool, error) {
	if ready, err := searchReady(q.tx, q.memberID); err != nil || !ready {
		return false, err
	}
	all, _, err := q.statusCounts()
	if err != nil {
		return false, err
	}
	limit := q.candidateLimit(true, all)
	if ok, err := q.words.orderedStart(q, limit); err != nil || !ok {
		return false, err
	}
	ok, err := q.readTextOrdered(limit, page)
	if err != nil || !ok {
		q.words.orderedDone(nil, false, true)
	}
	return ok, err
}

// readTextOrdered is textOrderedPage once the word cache has been
// consulted.
func (q *pageQuery) readTextOrdered(limit int, page *ItemPage) (bool, error) {
	tx, m, p := q.tx, q.m, q.p
	least, most := q.orderWindow()
	r, open, ok, err := memberIndex(q.memberID).Ordered(tx, m.needle, p.Desc, least, most, limit)
	if err != nil || !ok {
		return false, err
	}
	cands := slices.Clone(open)    // every candidate read, for the word cache
	var pending, hits []orderedHit // read and matched but for the text; verified, in the page's order
	seen := make(map[string]bool, len(open))
	k := itemKey(q.memberID, "")
	n := len(k)
	add := func(ids []string) error {
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			it := new(SavedItem)
			k = append(k[:n], id...)
			if err := getItem(tx, k, it); errors.Is(err, storage.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			suf := itemSortValue(it, SortCreatedAt)
			if contains(q.statuses, it.Status) && q.inWindow(suf) && m.matchFields(it) {
				pending = append(pending, orderedHit{it, suf})
			}
		}
		return nil
	}
	if err := add(open); err != nil {
		return false, err
	}
	var ids []string
	for {
		bound, more := r.Bound()
		slices.SortFunc(pending, func(a, b orderedHit) int {
			if p.Desc {
				return bytes.Compare(b.suf, a.suf)
			}
			return bytes.Compare(a.suf, b.suf)
		})
		// Verified in the page's order, those that come before every
		// item of the segments not read yet.
		for len(pending) > 0 && len(hits) <= q.first {
			c := pending[0]
			if v := binary.BigEndian.Uint64(c.suf); more && ((p.Desc && v <= bound) || (!p.Desc && v >= bound)) {
				break
			}
			pending = pending[1:]
			holds, err := m.matchText(c.it)
			if err != nil {
				return false, err
			}
			if holds {
				hits = append(hits, c)
			}
		}
		if len(hits) > q.first || !more {
			break
		}
		var within bool
		if ids, within, err = r.Next(tx, ids[:0], limit-len(seen)); err != nil || !within {
			return false, err
		}
		if err := add(ids); err != nil {
			return false, err
		}
		if len(cands) <= maxCachedIDs {
			cands = append(cands, ids...)
		}
	}
	// Every candidate of the index, and few enough to keep?
	_, more := r.Bound()
	q.words.orderedDone(cands, len(cands) <= maxCachedIDs && !more && least == 0 && most == math.MaxUint64, false)
	sufs := make([][]byte, len(hits))
	items := make([]*SavedItem, len(hits))
	for i, h := range hits {
		items[i], sufs[i] = h.it, h.suf
	}
	page.Items, page.Cursors, page.HasNext = cutPage(items, sufs, q.first, 1, p)
	return true, nil
}

// orderWindow is the range of order values (textOrder) the page's items
// may have: within its range of createdAt, and not before its cursor.
func (q *pageQuery) orderWindow() (least, most uint64) {
	least, most = 0, math.MaxUint64
	if q.lower != nil {
		least = binary.BigEndian.Uint64(q.lower)
	}
	if q.upper != nil {
		most = binary.BigEndian.Uint64(q.upper) // the item at upper itself is outside: a bound, not exact
	}
	if len(q.after) >= 8 {
		a := binary.BigEndian.Uint64(q.after)
		if q.p.Desc {
			most = min(most, a)
		} else {
			least = max(least, a)
		}
	}
	return least, most
}

// inWindow reports whether an item of key suffix suf (in the page's
// order) lies within the page's range and after its cursor.
func (q *pageQuery) inWindow(suf []byte) bool {
	if q.after != nil {
		c := bytes.Compare(suf, q.after)
		if (!q.p.Desc && c <= 0) || (q.p.Desc && c >= 0) {
			return false
		}
	}
	return (q.lower == nil || bytes.Compare(suf, q.lower) >= 0) && (q.upper == nil || bytes.Compare(suf, q.upper) < 0)
}

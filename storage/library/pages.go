package library

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Pages of saved items: keyset pagination along the ordered indexes, the
// candidates of a search, or one filter's ordered keys (searchplan.go chooses).

// ItemFilter selects saved items (the parsed `q` of the entries query).
type ItemFilter struct {
	Status        string // default StatusActive
	Type          string // "" for both
	LabelsAll     [][]string
	LabelsNot     []string
	HasHighlights *bool
	NoLabels      *bool
	SavedFrom     *time.Time // inclusive
	SavedTo       *time.Time // exclusive
	UpdatedFrom   *time.Time // inclusive
	UpdatedTo     *time.Time // exclusive
	Site          string
	Text          string
	ProgressFrom  *float64
	ProgressTo    *float64
	MinutesFrom   *int // reading time, at 200 words a minute
	MinutesTo     *int
}

// PageRequest asks for one page of a keyset-paginated list.
type PageRequest struct {
	Field SortField
	Desc  bool
	First int
	After string // the cursor of the last item of the previous page
}

// ItemPage is one page of saved items.
type ItemPage struct {
	Items   []*SavedItem
	Cursors []string
	HasNext bool
	// end, when set, is where a page cut short ended (cutShort), past
	// its last item: the next page starts after it.
	end string
}

// NextAfter is the cursor the next page starts after (PageRequest.After),
// "" when none follows: the last item's, or, for a page a pending
// emptying of the trash cut short, the place its walk reached (which may
// follow a page of no items).
func (p *ItemPage) NextAfter() string { return nextAfter(p.HasNext, p.Cursors, p.end) }

// nextAfter is NextAfter of a page of items or highlights.
func nextAfter(hasNext bool, cursors []string, end string) string {
	switch {
	case !hasNext:
		return ""
	case end != "":
		return end
	case len(cursors) > 0:
		return cursors[len(cursors)-1]
	}
	return ""
}

// cutShort ends a page's walk past maxHiddenPassed items of a pending
// emptying of the trash (hidden from clients, and not in the search
// budget, so that they do not end a search early with few results: a
// page would otherwise walk them all), at stop, the index key suffix it
// reached: its matches before stop are the page, and the next page starts
// after stop (cutPageAt).
type cutShort struct {
	stop   []byte
	passed int
}

// pass counts a hidden item at suf, and reports whether the walk ends
// there.
func (c *cutShort) pass(suf []byte, limit int) bool {
	if c.passed++; c.passed <= limit {
		return false
	}
	c.stop = append(c.stop[:0], suf...)
	return true
}

// ErrBadCursor is returned for a cursor that is malformed or belongs to
// another sort order.
var ErrBadCursor = storage.Invalid("the cursor is malformed or belongs to another sort order")

const cursorVersion = 1

func makeCursor(kind byte, f SortField, desc bool, suffix []byte) string {
	b := make([]byte, 0, 3+len(suffix))
	d := byte(0)
	if desc {
		d = 1
	}
	b = append(b, cursorVersion<<4|kind, sortFieldCode[f][0], d)
	b = append(b, suffix...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(c string, kind byte, f SortField, desc bool) ([]byte, error) {
	if len(c) > 1024 {
		return nil, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 3+8 {
		return nil, ErrBadCursor
	}
	d := byte(0)
	if desc {
		d = 1
	}
	if b[0] != cursorVersion<<4|kind || b[1] != sortFieldCode[f][0] || b[2] != d {
		return nil, ErrBadCursor
	}
	return b[3:], nil
}

// keyset is a walk of one index: the keys under prefix, in descending
// order when desc, from after (exclusive) when set, within [lower, upper)
// when those are set (each bound on the key's suffix).
type keyset struct {
	prefix              []byte
	desc                bool
	after, lower, upper []byte
	// values hands fn each key's value too.
	values bool
	// skip, when set, passes over the suffixes it reports without reading
	// their values.
	skip func(suffix []byte) bool
}

// scan calls fn with each key's suffix (and its value when ks.values)
// until fn returns false.
func (ks keyset) scan(tx *storage.Tx, fn func(suffix, val []byte) (bool, error)) error {
	prefix, desc, after, lower, upper, skip := ks.prefix, ks.desc, ks.after, ks.lower, ks.upper, ks.skip
	var start []byte
	switch {
	case after != nil:
		start = append(append([]byte{}, prefix...), after...)
	case !desc && lower != nil:
		start = append(append([]byte{}, prefix...), lower...)
	case desc && upper != nil:
		start = append(append([]byte{}, prefix...), upper...)
	}
	var skipKey func(k []byte) bool
	if skip != nil {
		skipKey = func(k []byte) bool { return skip(k[len(prefix):]) }
	}
	return tx.ScanSkipping(prefix, start, desc, !ks.values, skipKey, func(k, v []byte) (bool, error) {
		suf := k[len(prefix):]
		if after != nil && bytes.Equal(suf, after) {
			return true, nil
		}
		if !desc && upper != nil && bytes.Compare(suf, upper) >= 0 {
			return false, nil
		}
		if desc && lower != nil && bytes.Compare(suf, lower) < 0 {
			return false, nil
		}
		if desc && upper != nil && bytes.Compare(suf, upper) >= 0 {
			return true, nil
		}
		return fn(suf, v)
	})
}

// StatusAll in ItemFilter.Status lists items of every status (Inboxt's q
// without in:), merged in one order.
const StatusAll = "ALL"

// StatusNotDeleted in ItemFilter.Status lists the inbox and the archive,
// merged in one order (Omnivore's search without in:trash).
const StatusNotDeleted = "NOT_DELETED"

// SavedItemsPage returns one page of the member's items matching f, sorted
// by p.Field then id, starting after p.After: a cursor of a previous page,
// or the id of an item (Inboxt's cursors are item ids), which pages on from
// that item's place in the order whatever its status.
func (s Store) SavedItemsPage(ctx context.Context, memberID string, f ItemFilter, p PageRequest) (*ItemPage, error) {
	statuses := []string{f.Status}
	switch f.Status {
	case "":
		statuses[0] = StatusActive
	case StatusAll:
		statuses = []string{StatusActive, StatusArchived, StatusDeleted}
	case StatusNotDeleted:
		statuses = []string{StatusActive, StatusArchived}
	default:
		if _, ok := statusCode[f.Status]; !ok {
			return nil, storage.Invalid("unknown status")
		}
	}
	if !ValidSortField(p.Field) {
		return nil, storage.Invalid("unknown sort field")
	}
	q := pageQuery{memberID: memberID, f: f, p: p, first: max(p.First, 0), statuses: statuses, opts: &s.state().opts}
	// A time range on the sort field bounds the scan itself.
	rangeFrom, rangeTo := f.SavedFrom, f.SavedTo
	if p.Field == SortUpdatedAt {
		rangeFrom, rangeTo = f.UpdatedFrom, f.UpdatedTo
	}
	if p.Field == SortCreatedAt || p.Field == SortUpdatedAt {
		if rangeFrom != nil {
			q.lower = encUint64(encTime(nil, *rangeFrom), 0)
		}
		if rangeTo != nil {
			q.upper = encUint64(encTime(nil, *rangeTo), 0)
		}
	}
	if strings.TrimSpace(f.Text) != "" {
		c := wordCache.Of(s.st)
		q.words = &wordLookup{cache: c, gen: c.Generation()} // before the transaction
	}
	pages := newPageLookup(s.st, memberID, statuses, f, p) // before the transaction
	var lists *listsLookup
	if len(f.LabelsAll) > 0 || len(f.LabelsNot) > 0 {
		lists = newListsLookup(s.st)
	}
	page := &ItemPage{}
	cached := false
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		var err error
		if cached, err = pages.read(tx, memberID, page); err != nil || cached {
			return err
		}
		q := q
		q.tx = tx
		if err := q.readAfter(); err != nil {
			return err
		}
		m, err := newItemMatcher(tx, memberID, f, lists)
		if err != nil {
			return err
		}
		q.m = m
		defer func() { m.textFilter.Close() }() // set by the search below, perhaps
		m.words = q.words
		if !m.impossible && m.indexable() && !q.boundedBySortRange() {
			if q.textOrdered() {
				if ok, err := q.textOrderedPage(page); err != nil || ok {
					return err
				}
			}
			ids, ok, err := q.searchCandidates()
			if err != nil {
				return err
			}
			if ok {
				return q.candidatePage(ids, page)
			}
			if m.ordered != nil {
				return q.orderedPage(page)
			}
		}
		return q.walkPage(page)
	})
	if err != nil {
		return nil, err
	}
	q.words.done()
	lists.done(memberID)
	if !cached {
		pages.add(page)
	}
	return page, nil
}

// boundedBySortRange reports whether the only indexed filter is a time
// range on the sort field (updatesSince's, sorted by updatedAt since a
// time): the walk along the sort order is bounded by the range and reads
// the page's items and no more, where the candidates of the range would
// each be read and sorted, every page.
func (q *pageQuery) boundedBySortRange() bool {
	m, f := q.m, q.f
	if m.needle != nil || len(m.labelsAll) > 0 || f.Site != "" || f.Type != "" || (f.HasHighlights != nil && *f.HasHighlights) {
		return false
	}
	switch q.p.Field {
	case SortUpdatedAt:
		return f.SavedFrom == nil && f.SavedTo == nil
	case SortCreatedAt:
		return f.UpdatedFrom == nil && f.UpdatedTo == nil
	}
	return false
}

// pageQuery is one page asked of SavedItemsPage, resolved: the matcher of
// its filter, the statuses it lists, and the bounds of its walk as index
// key suffixes of the sort field.
type pageQuery struct {
	tx       *storage.Tx
	memberID string
	f        ItemFilter
	p        PageRequest
	first    int // p.First, at least 0
	statuses []string
	m        *itemMatcher
	words    *wordLookup // a word search's use of wordCache, else nil
	opts     *options    // the store's
	// after is the suffix the page starts after (nil: the first);
	// lower and upper bound the sort field's values (nil: none).
	after, lower, upper []byte
}

// readAfter sets q.after from the request's cursor, or from the item whose
// id it is.
func (q *pageQuery) readAfter() error {
	if q.p.After == "" {
		return nil
	}
	a, err := parseCursor(q.p.After, 1, q.p.Field, q.p.Desc)
	if err != nil && storage.IsID(q.p.After) {
		var it SavedItem
		if gerr := getItem(q.tx, itemKey(q.memberID, q.p.After), &it); gerr == nil {
			a, err = itemSortValue(&it, q.p.Field), nil
		} else if errors.Is(gerr, storage.ErrNotFound) {
			err = storage.Invalid("after: no saved item has the id %s", q.p.After)
		} else {
			err = gerr
		}
	}
	q.after = a
	return err
}

// pageWalk is the walk of a page along the statuses' indexes in the sort
// order: one allocation for a page's items, one for their index key
// suffixes (each ends where ends says), one item key buffer. Past a page
// (more statuses matching), items are allocated one by one.
type pageWalk struct {
	q     *pageQuery
	items []SavedItem
	found []*SavedItem
	arena []byte
	ends  []int
	k     []byte
	kn    int // the length of the item key prefix in k
	// bound, once the statuses walked have given first+1 matches, is
	// the last of the first+1 in the order: a later status's entries
	// past it cannot be on the page, so its walk stops there.
	bound []byte
	// cut ends the walk past maxHiddenPassed items of a pending emptying.
	cut cutShort
}

// walkPage fills page by walking each status's index in the sort order,
// matching each item, and merging the statuses' matches.
func (q *pageQuery) walkPage(page *ItemPage) error {
	w := &pageWalk{q: q, items: make([]SavedItem, min(q.first, 1000)+1)}
	w.found = make([]*SavedItem, 0, len(w.items))
	w.arena = make([]byte, 0, len(w.items)*24)
	w.ends = make([]int, 0, len(w.items))
	itemPrefix := itemKey(q.memberID, "")
	w.kn = len(itemPrefix)
	w.k = make([]byte, w.kn, w.kn+20)
	copy(w.k, itemPrefix)
	contributed := 0
	for _, status := range q.statuses {
		n, err := w.status(status)
		if err != nil {
			return err
		}
		if n > 0 {
			contributed++
		}
		if len(q.statuses) > 1 && len(w.found) > q.first {
			w.setBound()
		}
		if w.cut.stop != nil && (w.bound == nil || w.beyond(w.cut.stop)) {
			w.bound = append(w.bound[:0], w.cut.stop...) // the page ends there
		}
	}
	w.fill(page, contributed > 1)
	return nil
}

// beyond reports whether suf lies past the bound.
func (w *pageWalk) beyond(suf []byte) bool {
	if w.bound == nil {
		return false
	}
	c := bytes.Compare(suf, w.bound)
	return (w.q.p.Desc && c < 0) || (!w.q.p.Desc && c > 0)
}

// status walks one status's index, adding its matches (at most first+1:
// the merged page needs no more to know whether another follows), and
// returns how many it added.
func (w *pageWalk) status(status string) (int, error) {
	q, m := w.q, w.q.m
	n := 0
	prefix := itemIndexPrefix(q.memberID, status, q.p.Field)
	// Items outside the prefilter, and those whose text the text index
	// rules out (by the word cache's verdict, or the index's filter: as
	// match would, without counting a text read), are passed over by key,
	// their records not read; the budget counts them. (Not in a range of
	// the sort field, whose bounds only the records read stop at.)
	var skip func(suf []byte) bool
	byText := m.needle != nil && (m.textFilter != nil || (m.words != nil && m.words.cur != nil && m.words.cur.filtered)) &&
		q.lower == nil && q.upper == nil
	if m.prefilter != nil || byText {
		skip = func(suf []byte) bool {
			if w.beyond(suf) {
				return false
			}
			id := binary.BigEndian.Uint64(suf[len(suf)-8:])
			if _, ok := m.prefilter[id]; ok || m.prefilter == nil {
				if !byText || !m.textRuledOut(id) {
					return false
				}
			}
			m.examined++
			over, err := m.overBudget()
			return err == nil && !over
		}
	}
	err := keyset{prefix: prefix, desc: q.p.Desc, after: q.after, lower: q.lower, upper: q.upper, values: true, skip: skip}.scan(q.tx, func(suf, rec []byte) (bool, error) {
		if w.beyond(suf) {
			return false, nil
		}
		if m.prefilter != nil {
			if _, ok := m.prefilter[binary.BigEndian.Uint64(suf[len(suf)-8:])]; !ok {
				// Over the budget (skip let it through).
				if over, err := m.overBudget(); err != nil || over {
					if err == nil {
						err = ErrSearchTooBroad
					}
					return false, err
				}
				return true, nil
			}
		}
		var it *SavedItem
		if len(w.found) < len(w.items) {
			it = &w.items[len(w.found)]
		} else {
			it = new(SavedItem)
		}
		if len(rec) > 0 {
			if err := parseItemRecord(rec, it); err != nil {
				return false, err
			}
		} else {
			w.k = strconv.AppendUint(w.k[:w.kn], binary.BigEndian.Uint64(suf[len(suf)-8:]), 10)
			if err := getItem(q.tx, w.k, it); err != nil {
				if errors.Is(err, storage.ErrNotFound) {
					return true, nil
				}
				return false, err
			}
		}
		if m.cut.hides(it) {
			return !w.cut.pass(suf, q.opts.maxHiddenPassed), nil
		}
		ok, err := m.matchWithinBudget(it)
		if err != nil || !ok {
			return err == nil, err
		}
		w.found = append(w.found, it)
		w.arena = append(w.arena, suf...)
		w.ends = append(w.ends, len(w.arena))
		n++
		return n <= q.first, nil
	})
	return n, err
}

// setBound sets the bound to the last of the first+1 matches so far in
// the order.
func (w *pageWalk) setBound() {
	c := make([][]byte, len(w.ends))
	start := 0
	for i, end := range w.ends {
		c[i], start = w.arena[start:end], end
	}
	desc := w.q.p.Desc
	sort.Slice(c, func(a, b int) bool {
		if desc {
			return bytes.Compare(c[a], c[b]) > 0
		}
		return bytes.Compare(c[a], c[b]) < 0
	})
	w.bound = append(w.bound[:0], c[w.q.first]...)
}

// fill sets page to the first matches in the order (sorted when several
// statuses gave some) and their cursors.
func (w *pageWalk) fill(page *ItemPage, merge bool) {
	p, first := w.q.p, w.q.first
	found := w.found
	sufs := make([][]byte, len(found))
	for i, end := range w.ends {
		start := 0
		if i > 0 {
			start = w.ends[i-1]
		}
		sufs[i] = w.arena[start:end:end]
	}
	if merge {
		idx := make([]int, len(found))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			c := bytes.Compare(sufs[idx[a]], sufs[idx[b]])
			if p.Desc {
				return c > 0
			}
			return c < 0
		})
		f2, s2 := make([]*SavedItem, len(idx)), make([][]byte, len(idx))
		for i, j := range idx {
			f2[i], s2[i] = found[j], sufs[j]
		}
		found, sufs = f2, s2
	}
	page.Items, page.Cursors, page.HasNext, page.end = cutPageAt(&w.cut, found, sufs, first, 1, p)
}

// cutPage keeps the first of found (a page's matches, sorted, with their
// index key suffixes), says whether more follow, and makes the cursors of
// kind of those kept.
func cutPage[T any](found []T, sufs [][]byte, first int, kind byte, p PageRequest) (_ []T, cursors []string, more bool) {
	if len(found) > first {
		more = true
		found, sufs = found[:first], sufs[:first]
	}
	cursors = make([]string, len(sufs))
	for i, suf := range sufs {
		cursors[i] = makeCursor(kind, p.Field, p.Desc, suf)
	}
	return found, cursors, more
}

// cutPageAt is cutPage of found (sorted, with their index key suffixes
// sufs) for a walk c may have cut short: then only the matches before
// c.stop are the page, and when they do not fill it, end is the cursor of
// the stop the next page starts after.
func cutPageAt[T any](c *cutShort, found []T, sufs [][]byte, first int, kind byte, p PageRequest) (_ []T, cursors []string, more bool, end string) {
	if c.stop == nil {
		found, cursors, more = cutPage(found, sufs, first, kind, p)
		return found, cursors, more, ""
	}
	n := 0
	for n < len(sufs) {
		if o := bytes.Compare(sufs[n], c.stop); p.Desc && o <= 0 || !p.Desc && o >= 0 {
			break
		}
		n++
	}
	found, cursors, more = cutPage(found[:n], sufs[:n], first, kind, p)
	if more {
		return found, cursors, more, ""
	}
	return found, cursors, true, makeCursor(kind, p.Field, p.Desc, c.stop)
}

// ErrSearchTooBroad is the answer of a search over its budget.
var ErrSearchTooBroad = storage.Invalid("this search would read more than %d saved items or the text of more than %d; add a longer word or a filter (label:, site:, type:, has:, saved:) that fewer items match", maxExamined, maxVerified)

// candidatePage fills page from the candidate items ids (a superset of the
// matches, possibly with repeats), sorted as the index would give them.
func (q *pageQuery) candidatePage(ids []string, page *ItemPage) error {
	tx, m, statuses, p := q.tx, q.m, q.statuses, q.p
	type hit struct {
		it  *SavedItem
		suf []byte
	}
	var hits []hit
	seen := make(map[string]bool, len(ids))
	k := itemKey(m.memberID, "")
	n := len(k)
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		it := new(SavedItem)
		k = append(k[:n], id...)
		if err := getItem(tx, k, it); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			return err
		}
		if !contains(statuses, it.Status) {
			continue
		}
		suf := itemSortValue(it, p.Field)
		if !q.inWindow(suf) {
			continue
		}
		ok, err := m.match(it)
		if err != nil {
			return err
		}
		if ok {
			hits = append(hits, hit{it, suf})
		}
	}
	sort.Slice(hits, func(a, b int) bool {
		c := bytes.Compare(hits[a].suf, hits[b].suf)
		if p.Desc {
			return c > 0
		}
		return c < 0
	})
	first := max(p.First, 0)
	if len(hits) > first {
		page.HasNext = true
		hits = hits[:first]
	}
	page.Items = make([]*SavedItem, len(hits))
	page.Cursors = make([]string, len(hits))
	for i, h := range hits {
		page.Items[i] = h.it
		page.Cursors[i] = makeCursor(1, p.Field, p.Desc, h.suf)
	}
	return nil
}

// orderedPage fills page by m.ordered's plan: the entries of one filter's
// ordered keys (the page's order: createdAt), from after, within lower and
// upper; an entry of another status is passed over by its value, one
// another filter's keys lack by a probe, the others read (from the copy in
// the value, else by id) and matched, until first+1 match. The walk counts
// in the search budget like the walk along the sort order.
func (q *pageQuery) orderedPage(page *ItemPage) error {
	tx, m, statuses, p, after, lower, upper := q.tx, q.m, q.statuses, q.p, q.after, q.lower, q.upper
	plan := m.ordered
	var codes []byte
	for _, st := range statuses {
		codes = append(codes, statusCode[st][0])
	}
	var site []byte // a site: filter, checked on the domain in the value
	if m.f.Site != "" {
		site = []byte(strings.ToLower(m.f.Site))
	}
	first := max(p.First, 0)
	found := make([]*SavedItem, 0, min(first, 1000)+1)
	items := make([]SavedItem, cap(found)) // one allocation for a page's items
	var sufs [][]byte
	k := itemKey(m.memberID, "")
	n := len(k)
	var cut cutShort         // past maxHiddenPassed items of a pending emptying
	passed := func() error { // an entry passed over without reading its item
		m.examined++
		over, err := m.overBudget()
		if err == nil && over {
			err = ErrSearchTooBroad
		}
		return err
	}
	err := keyset{prefix: plan.ordered.ordered, desc: p.Desc, after: after, lower: lower, upper: upper, values: true}.scan(tx, func(suf, v []byte) (bool, error) {
		if len(suf) < 8 {
			return true, nil
		}
		status, domain, rec := parseOrderedValue(v)
		if status != 0 && bytes.IndexByte(codes, status) < 0 {
			return true, passed()
		}
		if site != nil && status != 0 && !bytes.Contains(domain, site) {
			return true, passed()
		}
		id := binary.BigEndian.Uint64(suf[len(suf)-8:])
		for _, src := range plan.probes {
			ok, err := src.has(id)
			if err != nil {
				return false, err
			}
			if !ok {
				return true, passed()
			}
		}
		var it *SavedItem
		if len(found) < cap(found) {
			it = &items[len(found)]
		} else {
			it = new(SavedItem)
		}
		if rec != nil {
			if err := parseItemRecord(rec, it); err != nil {
				return false, err
			}
		} else if err := getItem(tx, strconv.AppendUint(k[:n], id, 10), it); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return true, nil
			}
			return false, err
		}
		if !contains(statuses, it.Status) {
			return true, passed()
		}
		if m.cut.hides(it) {
			return !cut.pass(suf, q.opts.maxHiddenPassed), nil
		}
		ok, err := m.matchWithinBudget(it)
		if err != nil || !ok {
			return err == nil, err
		}
		found = append(found, it)
		sufs = append(sufs, append([]byte(nil), suf...))
		return len(found) <= first, nil
	})
	if err != nil {
		return err
	}
	page.Items, page.Cursors, page.HasNext, page.end = cutPageAt(&cut, found, sufs, first, 1, p)
	return nil
}

// The search budget: a page that would look at more items than
// maxExamined, or read the text of more than maxVerified, answers
// ErrSearchTooBroad instead (once the member's search index is built;
// before, search scans as it always did).
const (
	maxExamined = 100000
	maxVerified = 10000
)

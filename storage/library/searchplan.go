package library

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// The search planner: how a page combines its filters' keys, the text
// index's candidates and the walk along the sort order.

// maxCandidates is the largest candidate set a search reads item by item
// (then sorts); a larger one is left to the scan along the sort order.
const maxCandidates = 2000

// idSource is a filter with keys of its own, read as a cursor over the
// ids of the items it selects (in any order, perhaps repeated): parts are
// read one after the other, a few at a time, so that a search can read
// several sources side by side and stop when the smallest ends. has, when
// not nil, tells by point lookups whether the filter selects one item.
type idSource struct {
	parts []idPart
	has   func(id uint64) (bool, error)
	// count is the number of ids the source has (from the filter
	// counts, or read), -1 unknown.
	count int
	// ordered, when not nil, is the prefix of the source's ordered
	// filter keys (oy/, oh/, ol/): its items in the order of createdAt.
	ordered []byte
	// inValue: the values of the ordered keys tell whether the source
	// selects an item (site:, by the domain).
	inValue bool

	part int
	it   kv.Cursor
	ids  []uint64
	done bool // every id read
	bad  bool // a key without an item id: the source is left to the scan
}

// idPart is one key range of a source: the keys under prefix from start
// (prefix when nil) up to a suffix of upper (nil: the end of the prefix).
type idPart struct {
	prefix, start, upper []byte
	decimal              bool // the suffix is the id in decimal (label keys), else its last 8 bytes
}

// readIDs reads src's ids until it holds more than upto or has them all.
func readIDs(tx *storage.Tx, src *idSource, upto int) {
	for !src.done && !src.bad && len(src.ids) <= upto {
		if src.it == nil {
			if src.part == len(src.parts) {
				src.done = true
				break
			}
			p := src.parts[src.part]
			src.it = tx.Cursor(kv.Range{Prefix: p.prefix, Start: p.start, KeysOnly: true})
		}
		p := src.parts[src.part]
		if !src.it.Valid() {
			if kv.CursorErr(src.it) != nil {
				src.bad = true // left to the scan
				break
			}
			src.close()
			src.part++
			continue
		}
		suf := src.it.Key()[len(p.prefix):]
		if p.upper != nil && bytes.Compare(suf, p.upper) >= 0 {
			src.close()
			src.part++
			continue
		}
		if p.decimal {
			id, err := strconv.ParseUint(string(suf), 10, 64)
			if err != nil {
				src.bad = true
				break
			}
			src.ids = append(src.ids, id)
		} else if len(suf) >= 8 {
			src.ids = append(src.ids, binary.BigEndian.Uint64(suf[len(suf)-8:]))
		}
		src.it.Next()
	}
	if src.done || src.bad {
		src.close()
	}
}

func (src *idSource) close() {
	if src.it != nil {
		src.it.Close()
		src.it = nil
	}
}

// siteSource is the source of the items of the domains that contain
// site (from the domains' counts, fc/d/), counted; for more than
// maxSiteDomains domains it has no parts (it is only counted).
func siteSource(tx *storage.Tx, memberID, site string) (*idSource, error) {
	prefix := filterCountKey(memberID, "d", "")
	var domains []string
	src := &idSource{}
	if err := tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
		if d := string(k[len(prefix):]); strings.Contains(strings.ToLower(d), site) && len(v) == 8 {
			domains = append(domains, d)
			src.count += int(binary.BigEndian.Uint64(v))
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	src.inValue = true
	if len(domains) > maxSiteDomains {
		return src, nil // a broad site: (".com"): the scan finds its items soon
	}
	for _, d := range domains {
		src.parts = append(src.parts, idPart{prefix: encString(siteItemsPrefix(memberID), d)})
	}
	if len(domains) <= 4 {
		src.has = func(id uint64) (bool, error) {
			for _, p := range src.parts {
				if ok, err := tx.Has(encUint64(p.prefix, id)); err != nil || ok {
					return ok, err
				}
			}
			return false, nil
		}
	}
	return src, nil
}

// maxSiteDomains is the most domains a site: search reads the items of;
// more, and it is left to the scan along the sort order.
const maxSiteDomains = 64

// rangeSource is the source of the items of statuses whose createdAt (or
// updatedAt) lies in [from, to).
func rangeSource(memberID string, statuses []string, field SortField, from, to *time.Time) *idSource {
	var lower, upper []byte
	if from != nil {
		lower = encUint64(encTime(nil, *from), 0)
	}
	if to != nil {
		upper = encUint64(encTime(nil, *to), 0)
	}
	src := &idSource{count: -1}
	for _, st := range statuses {
		prefix := itemIndexPrefix(memberID, st, field)
		var start []byte
		if lower != nil {
			start = append(append([]byte{}, prefix...), lower...)
		}
		src.parts = append(src.parts, idPart{prefix: prefix, start: start, upper: upper})
	}
	return src
}

// sortedIDs sorts ids and drops repeats.
func sortedIDs(ids []uint64) []uint64 {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// intersectIDs keeps in a (sorted) the ids also in b (sorted).
func intersectIDs(a, b []uint64) []uint64 {
	out := a[:0]
	j := 0
	for _, id := range a {
		for j < len(b) && b[j] < id {
			j++
		}
		if j < len(b) && b[j] == id {
			out = append(out, id)
		}
	}
	return out
}

// searchCandidates returns the ids of a small set of items that holds
// every match of f: the intersection of what the filters' keys and the
// trigram index give, or ok false when that is more than maxCandidates or
// none of them can tell.
//
// Sources are read up to the candidate limit first; when every one is
// larger, those of at most maxSourceItems ids are intersected, and the
// intersection is narrowed by point lookups in the keys of the larger
// ones (label, type, highlights) while it is no larger than
// maxSourceItems: whatever the selectivity of two filters, a search reads
// at most about maxSourceItems keys of each before it either reads the
// exact intersection item by item or walks the sort order skipping by key
// every item outside it.
func (q *pageQuery) searchCandidates() (ids []string, ok bool, err error) {
	version, err := searchVersion(q.tx, q.memberID)
	if err != nil {
		return nil, false, err
	}
	ready := version >= 4 && version <= searchIndexVersion
	// A page in the order of createdAt can walk a filter's ordered keys.
	ordered := ready && version >= orderedKeysVersion && q.p.Field == SortCreatedAt
	var all, inStatuses float64 // the member's items, those of the page's statuses
	if ready {
		if all, inStatuses, err = q.statusCounts(); err != nil {
			return nil, false, err
		}
	}
	limit := q.candidateLimit(ready, all)
	srcs, err := q.filterSources(ready, ordered)
	defer func() {
		for _, src := range srcs {
			src.close()
		}
	}()
	if err != nil {
		return nil, false, err
	}
	counted := countedSources(q.tx, srcs, limit)
	// Free text the trigram index narrows to a few candidates first:
	// filters need not be read then (the candidates' items are matched).
	var text []string
	textSmall := false
	if q.m.needle != nil && (len(counted) == 0 || counted[0].count > 50) {
		if text, textSmall, q.m.textFilter, err = q.words.textCandidates(q, limit); err != nil {
			return nil, false, err
		}
		if textSmall && (len(counted) == 0 || counted[0].count > limit) {
			return text, true, nil
		}
	}
	plan := searchPlanner{q: q, ready: ready, copies: ordered && version >= orderedCopiesVersion, counted: counted, limit: limit,
		all: all, inStatuses: inStatuses}.plan()
	cand, haveCand, err := q.narrow(plan, counted, limit)
	if err != nil || plan.kind == planOrdered {
		return nil, false, err
	}
	switch {
	case textSmall && haveCand:
		var both []string
		for _, id := range text {
			if _, found := slices.BinarySearch(cand, idBytes(id)); found {
				both = append(both, id)
			}
		}
		return both, true, nil
	case textSmall:
		return text, true, nil
	case !haveCand:
		return nil, false, nil
	}
	ids = make([]string, len(cand))
	for i, id := range cand {
		ids[i] = strconv.FormatUint(id, 10)
	}
	return ids, true, nil
}

// candidateLimit is how many candidates the page reads one by one at
// most, of the member's items. Reading c candidates one by one costs
// about c point reads; the scan along the sort order reads about first ×
// items / c entries, each about an eighth of a point read (measured on
// the search corpus): candidates win while c² < first × items / 8.
func (q *pageQuery) candidateLimit(ready bool, items float64) int {
	if !ready {
		return maxCandidates
	}
	return min(maxCandidates, max(q.opts.candidateFloor, int(math.Sqrt(float64(max(q.first, 1))*items/8))))
}

// statusCounts are the member's items and those of the page's statuses,
// from the filter counts.
func (q *pageQuery) statusCounts() (all, inStatuses float64, err error) {
	for st, c := range statusCode {
		n, err := countAt(q.tx, filterCountKey(q.memberID, "s", c))
		if err != nil {
			return 0, 0, err
		}
		all += float64(n)
		if contains(q.statuses, st) {
			inStatuses += float64(n)
		}
	}
	return all, inStatuses, nil
}

// filterSources are the sources of ids of the filters that have keys,
// with the number of items each selects: from the counts (fc/) once the
// index is built (ready), else unknown (-1). ordered: their ordered keys
// may be walked.
func (q *pageQuery) filterSources(ready, ordered bool) (srcs []*idSource, err error) {
	tx, memberID, f := q.tx, q.memberID, q.f
	for _, group := range q.m.labelsAll {
		src, err := labelSource(tx, memberID, group, ready, ordered)
		if err != nil {
			return srcs, err
		}
		srcs = append(srcs, src)
	}
	if f.SavedFrom != nil || f.SavedTo != nil {
		srcs = append(srcs, rangeSource(memberID, q.statuses, SortCreatedAt, f.SavedFrom, f.SavedTo))
	}
	if f.UpdatedFrom != nil || f.UpdatedTo != nil {
		srcs = append(srcs, rangeSource(memberID, q.statuses, SortUpdatedAt, f.UpdatedFrom, f.UpdatedTo))
	}
	if !ready {
		return srcs, nil
	}
	if f.Site != "" {
		src, err := siteSource(tx, memberID, strings.ToLower(f.Site))
		if err != nil {
			return srcs, err
		}
		srcs = append(srcs, src)
	}
	if f.Type != "" {
		src, err := keySource(tx, typeItemsPrefix(memberID, f.Type), filterCountKey(memberID, "t", typeCode(f.Type)))
		if err != nil {
			return srcs, err
		}
		if ordered {
			src.ordered = orderedTypePrefix(memberID, f.Type)
		}
		srcs = append(srcs, src)
	}
	if f.HasHighlights != nil && *f.HasHighlights {
		src, err := keySource(tx, highlightedItemsPrefix(memberID), filterCountKey(memberID, "h", ""))
		if err != nil {
			return srcs, err
		}
		if ordered {
			src.ordered = orderedHighlightedPrefix(memberID)
		}
		srcs = append(srcs, src)
	}
	return srcs, nil
}

// labelSource is the source of the items with one of the labels of group
// (counted when ready).
func labelSource(tx *storage.Tx, memberID string, group []string, ready, ordered bool) (*idSource, error) {
	src := &idSource{count: -1, has: func(id uint64) (bool, error) {
		s := strconv.FormatUint(id, 10)
		for _, l := range group {
			if ok, err := tx.Has(labelItemKey(memberID, l, s)); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	}}
	if ready {
		src.count = 0
	}
	if ordered && len(group) == 1 {
		src.ordered = orderedLabelPrefix(memberID, group[0])
	}
	for _, l := range group {
		src.parts = append(src.parts, idPart{prefix: labelItemKey(memberID, l, ""), decimal: true})
		if ready {
			n, err := countAt(tx, filterCountKey(memberID, "l", l))
			if err != nil {
				return nil, err
			}
			src.count += int(n)
		}
	}
	return src, nil
}

// keySource is the source of the keys under prefix (an 8-byte id ending
// each), counted at countKey.
func keySource(tx *storage.Tx, prefix, countKey []byte) (*idSource, error) {
	n, err := countAt(tx, countKey)
	if err != nil {
		return nil, err
	}
	return &idSource{parts: []idPart{{prefix: prefix}}, count: int(n),
		has: func(id uint64) (bool, error) { return tx.Has(encUint64(prefix, id)) }}, nil
}

// countedSources reads the sources without a count up to limit (a small
// one is as good as counted, a larger one is left to the match of each
// item) and returns the counted ones, ascending, the first that has keys
// to read first (one without, a broad site:, only counts).
func countedSources(tx *storage.Tx, srcs []*idSource, limit int) []*idSource {
	for _, src := range srcs {
		if src.count < 0 {
			if readIDs(tx, src, limit); src.done {
				src.ids = sortedIDs(src.ids)
				src.count = len(src.ids)
			}
		}
	}
	var counted []*idSource
	for _, src := range srcs {
		if src.count >= 0 {
			counted = append(counted, src)
		}
	}
	slices.SortStableFunc(counted, func(a, b *idSource) int { return a.count - b.count })
	if i := slices.IndexFunc(counted, func(src *idSource) bool { return src.parts != nil }); i > 0 {
		base := counted[i]
		counted = slices.Insert(slices.Delete(counted, i, i+1), 0, base)
	} else if i < 0 {
		counted = nil
	}
	return counted
}

// narrow carries out plan: for candidates, the ids of the smallest
// source narrowed by the others (ok); for a prefilter, those set as the
// matcher's prefilter; for the ordered keys' walk, the plan set as the
// matcher's.
func (q *pageQuery) narrow(plan searchPlan, counted []*idSource, limit int) (cand []uint64, ok bool, err error) {
	switch plan.kind {
	case planOrdered:
		q.m.ordered = &plan
		return nil, false, nil
	case planWalk:
		return nil, false, nil
	}
	base := counted[0]
	if !base.done {
		if readIDs(q.tx, base, q.opts.maxSourceItems); !base.done || base.bad {
			return nil, false, nil // more than counted (a count behind): the walk
		}
		base.ids = sortedIDs(base.ids)
	}
	inter := slices.Clone(base.ids)
	for i, src := range counted[1:] {
		switch plan.narrow[i] {
		case narrowRead:
			if readIDs(q.tx, src, q.opts.maxSourceItems); src.done && !src.bad {
				src.ids = sortedIDs(src.ids)
				inter = intersectIDs(inter, src.ids)
			}
		case narrowProbe:
			kept := inter[:0]
			for _, id := range inter {
				ok, err := src.has(id)
				if err != nil {
					return nil, false, err
				}
				if ok {
					kept = append(kept, id)
				}
			}
			inter = kept
		}
		src.close()
	}
	if len(inter) <= maxCandidates && (plan.kind == planCandidates || (len(inter) <= limit && q.opts.forcePlan != planPrefilter)) {
		return inter, true, nil
	}
	// Too many to read one by one, few enough to skip the others along
	// the sort order without reading them.
	q.m.prefilter = make(map[uint64]struct{}, len(inter))
	for _, id := range inter {
		q.m.prefilter[id] = struct{}{}
	}
	return nil, false, nil
}

// planKind is how a search combines its filters.
type planKind int

// narrowKind is how the candidates of a search are narrowed by a filter.
type narrowKind int

// searchPlan is how a search combines its filters: counted (ascending)
// narrowed one after the other, narrow[i] saying how for counted[i+1].
type searchPlan struct {
	kind   planKind
	narrow []narrowKind
	// planOrdered: the filter whose ordered keys are walked, and the
	// others looked up by key on each of its items before it is read.
	ordered *idSource
	probes  []*idSource
}

// searchPlanner chooses the cheapest way to combine a page's counted
// filters (ascending by count), by the cost model below: the items
// expected to match are the statuses' items times each filter's share of
// all items (as if independent), and the walk along the sort order reads
// each status's entries until first+1 of them match.
type searchPlanner struct {
	q       *pageQuery
	ready   bool // the member's index and counts are built
	copies  bool // the ordered filter keys carry their items' records
	counted []*idSource
	limit   int // the most candidates read one by one
	// all is the member's items, inStatuses those of the page's statuses
	// (from the counts, when ready); expect is how many of those are
	// expected to match, walked how many entries the walk along the sort
	// order reads.
	all, inStatuses, expect, walked float64
	// ordered is the smallest filter with ordered keys, if any.
	ordered *idSource
}

// plan is the plan the planner chooses.
func (sp searchPlanner) plan() searchPlan {
	if len(sp.counted) == 0 {
		return searchPlan{kind: planWalk}
	}
	// The smallest filter with ordered keys (a page in their order).
	for _, src := range sp.counted {
		if src.ordered != nil {
			sp.ordered = src
			break
		}
	}
	if sp.q.opts.forcePlan == planOrdered && sp.ordered != nil {
		plan := searchPlan{kind: planOrdered, ordered: sp.ordered}
		for i, src := range sp.counted {
			if src != sp.ordered && src.has != nil && !src.inValue && i%2 == 0 { // the others left to the match
				plan.probes = append(plan.probes, src)
			}
		}
		return plan
	}
	if !sp.ready || sp.all == 0 || (sp.q.opts.forcePlan != planWalk && sp.q.opts.forcePlan != planOrdered) {
		return sp.uncounted()
	}
	return sp.cheapest()
}

// uncounted is the plan without counts: the smallest read one by one when
// small, else a prefilter when it can be one.
func (sp searchPlanner) uncounted() searchPlan {
	base := sp.counted[0]
	kind := sp.q.opts.forcePlan
	if kind == planOrdered {
		kind = planWalk
	}
	if kind == planWalk {
		kind = planCandidates
		if base.count > sp.limit {
			kind = planPrefilter
		}
	}
	if base.count > sp.q.opts.maxSourceItems {
		return searchPlan{kind: planWalk}
	}
	narrow := make([]narrowKind, len(sp.counted)-1)
	for i, src := range sp.counted[1:] {
		if src.parts != nil {
			narrow[i] = narrowRead
		}
		if src.has != nil && (src.count > sp.q.opts.maxSourceItems || src.parts == nil || (sp.q.opts.forcePlan != planWalk && i%2 == 1)) {
			narrow[i] = narrowProbe
		}
	}
	return searchPlan{kind: kind, narrow: narrow}
}

// share is the share of all items that src selects.
func (sp searchPlanner) share(src *idSource) float64 { return min(float64(src.count)/sp.all, 1) }

// cheapest is the plan of the least cost by the counts.
func (sp searchPlanner) cheapest() searchPlan {
	base := sp.counted[0]
	share := 1.0
	for _, src := range sp.counted {
		share *= sp.share(src)
	}
	sp.expect = max(sp.inStatuses*share, 0.5)
	// The entries the walk reads, over the statuses: until first+1 match
	// (a later status stops where the first+1 of those before end).
	sp.walked = min(sp.inStatuses, float64(sp.q.first+1)*sp.inStatuses/sp.expect)
	costWalkPlan := sp.walked * costWalk
	costOrdered, orderedPlan := sp.orderedCost()
	if base.count > sp.q.opts.maxSourceItems {
		if costOrdered < costWalkPlan {
			return orderedPlan
		}
		return searchPlan{kind: planWalk}
	}
	// A prefilter of the smallest's ids (narrowing it saves little of
	// the walk).
	costPrefilter := float64(base.count)*costKey + sp.walked*(costSkip+costWalk*float64(base.count)/sp.all)
	costCand, narrow, c := sp.candidatesCost()
	if trace := sp.q.opts.tracePlan; trace != nil {
		counts := make([]int, len(sp.counted))
		for i, src := range sp.counted {
			counts[i] = src.count
		}
		trace(fmt.Sprintf("counts %v expect %.0f walked %.0f: walk %.0f µs, prefilter %.0f µs, candidates %.0f µs (%v, %.0f), ordered %.0f µs",
			counts, sp.expect, sp.walked, costWalkPlan, costPrefilter, costCand, narrow, c, costOrdered))
	}
	switch {
	case costOrdered < costCand && costOrdered < costPrefilter && costOrdered < costWalkPlan:
		return orderedPlan
	case costCand <= costPrefilter && costCand <= costWalkPlan && c <= maxCandidates:
		return searchPlan{kind: planCandidates, narrow: narrow}
	case costPrefilter < costWalkPlan:
		return searchPlan{kind: planPrefilter, narrow: make([]narrowKind, len(narrow))}
	}
	return searchPlan{kind: planWalk}
}

// orderedCost is the cost of walking the ordered keys of a filter: its
// entries until first+1 match, each passed over by its status or a probe
// of another filter, or read (infinite without such a filter).
func (sp searchPlanner) orderedCost() (float64, searchPlan) {
	ordered := sp.ordered
	plan := searchPlan{kind: planOrdered, ordered: ordered}
	if ordered == nil {
		return math.Inf(1), plan
	}
	co := float64(ordered.count)
	walkedO := min(co, float64(sp.q.first+1)*co/sp.expect)
	surv := walkedO * sp.inStatuses / sp.all
	cost := walkedO * costSkip
	for _, src := range sp.counted {
		if src != ordered && src.inValue { // checked on the values walked
			surv *= sp.share(src)
		}
	}
	for _, src := range sp.counted {
		if src == ordered || src.has == nil || src.inValue {
			continue
		}
		after := surv * sp.share(src)
		if (surv-after)*costRead < surv*costProbe {
			continue
		}
		cost += surv * costProbe
		plan.probes = append(plan.probes, src)
		surv = after
	}
	read := costRead
	if sp.copies {
		read = costWalk // from the walk's values, as the walk along the sort order
	}
	return cost + surv*read, plan
}

// candidatesCost is the cost of reading the candidates: the smallest's
// ids, each other filter read or probed (the cheaper) while it narrows,
// then the items read; with how each narrows and how many are read.
func (sp searchPlanner) candidatesCost() (cost float64, narrow []narrowKind, c float64) {
	narrow = make([]narrowKind, len(sp.counted)-1)
	c = float64(sp.counted[0].count)
	cost = c * costKey
	for i, src := range sp.counted[1:] {
		read, probe := math.Inf(1), math.Inf(1)
		if src.count <= sp.q.opts.maxSourceItems && src.parts != nil {
			read = float64(src.count) * costKey
		}
		if src.has != nil {
			probe = c * costProbe
		}
		if math.IsInf(min(read, probe), 1) {
			continue
		}
		// Worth it when it saves more item reads than it costs.
		after := c * sp.share(src)
		if (c-after)*costRead < min(read, probe) {
			continue
		}
		if read <= probe {
			narrow[i] = narrowRead
			cost += read
		} else {
			narrow[i] = narrowProbe
			cost += probe
		}
		c = after
	}
	return cost + c*costRead, narrow, c
}

// The cost model of a search combining filters (microseconds, measured by
// TestSearchCostsOnSeededStore on the 100,000-item search corpus; their
// ratios matter, not their values): reading one id of a filter's keys,
// one point lookup in a filter's keys, reading an item by id (candidates),
// one entry of the walk along the sort order read and decoded, and one
// passed over by its key (a prefilter).
const (
	costKey   = 0.3
	costProbe = 1.3
	costRead  = 8.0
	costWalk  = 1.8
	costSkip  = 1.2
)

const (
	planWalk       planKind = iota // the walk along the sort order, matching each item
	planCandidates                 // read the ids of the smallest, narrow, read those items and sort
	planPrefilter                  // read the ids of the smallest, narrow; the walk passes over the others by key
	planOrdered                    // walk the ordered keys of one filter, probe others by key, read and match the rest (orderedPage)
)

const (
	narrowNone  narrowKind = iota // checked by the match of each item read
	narrowRead                    // its ids read and intersected
	narrowProbe                   // each id looked up in its keys
)

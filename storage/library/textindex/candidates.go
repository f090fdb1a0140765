package textindex

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math/bits"
	"slices"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// maxTrigrams is how many of the needle's trigrams a search reads and
// intersects in one segment: those that other segments lacked first (the
// rarest), which narrow the candidates about as much as all of them.
const maxTrigrams = 4

// Candidates returns the ids of the documents that may contain the folded
// needle, or ok false when the index cannot tell (a needle shorter than 3
// bytes, more than limit indexed candidates, more than unindexed queued or
// wide ones). The queued documents are all candidates: right after a
// restart or a burst of writes the queue may hold thousands, which the
// caller verifies one by one rather than its whole collection.
func (x Index) Candidates(tx *storage.Tx, needle []byte, limit, unindexed int) (ids []string, ok bool, err error) {
	ids, ok, _, err = x.Lookup(tx, needle, limit, unindexed)
	return ids, ok, err
}

// Lookup is Candidates that, when the candidates are more than limit but
// a small share of the documents (a word in a few per cent of them),
// returns a Filter of them instead: a walk along the caller's order then
// verifies only the documents the filter lets through.
//
// The segments are read from the newest document numbers down, and the
// reading stops as soon as the answer is a Filter or nothing: a page of
// the newest items, right after the store is opened, then reads the
// postings of the few small segments that hold them, and the Filter
// reads the others only if the walk comes to their numbers.
func (x Index) Lookup(tx *storage.Tx, needle []byte, limit, unindexed int) (ids []string, ok bool, filter *Filter, err error) {
	if len(needle) < 3 {
		return nil, false, nil, nil
	}
	meta, err := x.ReadMeta(tx)
	if err != nil {
		return nil, false, nil, err
	}
	if ids, err = x.unindexed(tx, meta, unindexed); err != nil || len(ids) > unindexed {
		return nil, false, nil, err
	}
	r := newPostingsReader(x, meta, needle)
	r.set = make(bitset, (int(meta.NextDoc)+63)/64)
	slices.SortStableFunc(r.segs, func(a, b Segment) int { return cmp.Compare(b.Hi, a.Hi) })
	for {
		more, err := r.next(tx)
		if err != nil {
			return nil, false, nil, err
		}
		if !more {
			break
		}
		if r.found > limit {
			switch {
			case r.found*filterShare <= r.docs:
				return nil, false, r.filter(ids), nil
			case r.found > 8*limit:
				// Far more documents than limit: a frequent phrase,
				// which the scan along the sort order finds soon.
				return nil, false, nil, nil
			}
		}
	}
	if n := r.found; n > limit {
		if n > int(meta.NextDoc)/filterShare {
			return nil, false, nil, nil
		}
		return nil, false, r.filter(ids), nil
	}
	for i, w := range r.set {
		for w != 0 {
			doc := uint32(i*64 + bits.TrailingZeros64(w))
			w &= w - 1
			id, err := tx.Get(x.docIDKey(doc))
			if errors.Is(err, storage.ErrNotFound) {
				continue // re-indexed or removed
			}
			if err != nil {
				return nil, false, nil, err
			}
			ids = append(ids, string(id))
		}
	}
	return ids, true, nil, nil
}

// filterShare: a Filter is made for candidates that are at most this
// fraction (1/filterShare) of the documents; more, and the walk along the
// caller's order finds the needle soon enough by verifying each.
const filterShare = 8

// Filter tells, by a document's number, whether it may contain a needle
// (Lookup): a document outside the candidates of the trigram index does
// not, unless its text waits in the queue or is wide (open), or it has no
// number the candidates were taken from. The caller closes it (Close)
// before its transaction ends.
type Filter struct {
	x    Index
	post *postingsReader // the candidates, read down to post.from()
	open map[string]bool
	nums numReader
}

// May reports whether document id may contain the needle: false only when
// it certainly does not. A read of its number, far less than reading its
// text, and of the postings of the segments that may hold that number
// when the filter has not read them yet.
func (f *Filter) May(tx *storage.Tx, id string) (bool, error) {
	if f.open[id] {
		return true, nil
	}
	v, err := f.nums.get(tx, f.x.DocKey(id))
	if err != nil || len(v) != 4 {
		return err == nil, err // no number (not found): a candidate
	}
	doc := binary.BigEndian.Uint32(v)
	if doc >= f.post.nextDoc {
		return true, nil
	}
	for doc < f.post.from() {
		if _, err := f.post.next(tx); err != nil {
			return false, err
		}
	}
	return f.post.set.has(doc), nil
}

// Close releases what the filter holds in its transaction (nil: nothing).
func (f *Filter) Close() {
	if f != nil {
		f.nums.close()
	}
}

// postingsReader reads a needle's candidates segment by segment, those
// with the highest document numbers first (Segment's Hi), into a set (or,
// for an OrderedReader, by their order bounds, returned a segment at a
// time).
type postingsReader struct {
	x        Index
	segs     []Segment // not read yet, by Hi descending
	distinct [][]byte  // the needle's trigrams
	order    []int     // the order of their lookups, the last one missing first
	set      bitset
	nextDoc  uint32
	found    int // documents in set
	docs     int // documents of the segments read
}

func newPostingsReader(x Index, meta *Meta, needle []byte) *postingsReader {
	r := &postingsReader{x: x, segs: slices.Clone(meta.Segments), distinct: distinctTrigrams(needle), nextDoc: meta.NextDoc}
	r.order = make([]int, len(r.distinct))
	for i := range r.order {
		r.order[i] = i
	}
	return r
}

// from is the number from which the set holds every candidate: the
// segments not read yet hold only numbers below it.
func (r *postingsReader) from() uint32 {
	if len(r.segs) == 0 {
		return 0
	}
	return r.segs[0].Hi
}

// filter is the Filter of the candidates, reading the rest of them as
// they are asked for; open are the queued and wide documents.
func (r *postingsReader) filter(open []string) *Filter {
	f := &Filter{x: r.x, post: r, open: make(map[string]bool, len(open)), nums: numReader{prefix: r.x.key("td/")}}
	for _, id := range open {
		f.open[id] = true
	}
	return f
}

// next reads the next segment: the postings of up to maxTrigrams of the
// needle's distinct trigrams, in the order of lookups, intersected into
// the set. A document with the needle has every one of its trigrams in
// the segment that indexed it, so a segment without one of them is passed
// over without reading its other postings: the trigram it lacked is
// looked up first in the next segment (a rare word's rarest trigram is in
// few segments, and an absent key costs a filter probe, where a frequent
// trigram's postings are kilobytes). false when none was left.
func (r *postingsReader) next(tx *storage.Tx) (bool, error) {
	if len(r.segs) == 0 {
		return false, nil
	}
	sg := r.segs[0]
	r.segs = r.segs[1:]
	r.docs += int(sg.Docs)
	docs, err := r.segmentDocs(tx, sg, nil)
	for _, doc := range docs {
		r.set.set(doc)
	}
	r.found += len(docs)
	return true, err
}

// segmentDocs appends to docs the candidates of segment sg below
// r.nextDoc, ascending.
func (r *postingsReader) segmentDocs(tx *storage.Tx, sg Segment, docs []uint32) ([]uint32, error) {
	var postings [][]byte
	k := r.x.TrigramPrefix()
	n := len(k)
	for j, i := range r.order[:min(len(r.order), maxTrigrams)] {
		k = append(binary.BigEndian.AppendUint32(k[:n], sg.ID), r.distinct[i]...)
		v, err := tx.Get(k)
		if errors.Is(err, storage.ErrNotFound) {
			copy(r.order[1:j+1], r.order[:j])
			r.order[0] = i
			return docs, nil
		}
		if err != nil {
			return docs, err
		}
		postings = append(postings, v)
	}
	return intersectPostings(postings, docs, r.nextDoc)
}

// numReader reads document numbers (td/) for a caller that asks for them
// in the order of the ids, or nearly: a walk along an order that follows
// the ids, as the order of the items' creation does (ids increase with
// time). A point read costs a search of a block in each level of the
// store's tree; a cursor that follows the walk reads the next keys of the
// block it is in, several times cheaper right after a restart, when a
// word's first page asks for the numbers of hundreds of items. When the
// ids asked for do not follow one another (a walk in another order), it
// goes back to point reads.
type numReader struct {
	prefix []byte // of the keys read
	cur    kv.Cursor
	desc   bool
	last   []byte // the key asked for before, until the cursor opens
	asked  int    // keys asked of the cursor
	seeks  int    // of which it had to seek
	points bool   // point reads from now on
}

// Bounds of numReader: the keys a cursor passes over before it seeks the
// key asked for instead, and how many seeks of how many asked send it
// back to point reads.
const (
	maxCursorSteps = 32
	minCursorAsked = 16
)

// get returns the value of key (nil when absent).
func (r *numReader) get(tx *storage.Tx, key []byte) ([]byte, error) {
	switch {
	case r.points || r.last == nil || bytes.Equal(key, r.last):
		r.last = append(r.last[:0], key...)
		v, err := tx.Get(key)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, nil
		}
		return v, err
	case r.cur == nil:
		r.desc = bytes.Compare(key, r.last) < 0
		r.cur = tx.Cursor(kv.Range{Prefix: r.prefix, Start: key, Reverse: r.desc})
	case r.before(key, r.last):
		r.seeks++ // back: the cursor is past it
		r.cur.Seek(key)
	default:
		// The cursor is on the first key not before the last asked:
		// the keys up to this one follow.
		steps := 0
		for r.cur.Valid() && r.before(r.cur.Key(), key) {
			if steps++; steps > maxCursorSteps {
				r.seeks++
				r.cur.Seek(key)
				break
			}
			r.cur.Next()
		}
	}
	r.last = append(r.last[:0], key...)
	if r.asked++; r.asked >= minCursorAsked && 2*r.seeks > r.asked {
		r.close() // the ids asked for do not follow one another
		r.points = true
	}
	if r.cur == nil || !r.cur.Valid() {
		if r.cur != nil {
			return nil, kv.CursorErr(r.cur)
		}
		return r.get(tx, key)
	}
	if !bytes.Equal(r.cur.Key(), key) {
		return nil, nil
	}
	return r.cur.Value()
}

// before reports whether a comes before b in the cursor's direction.
func (r *numReader) before(a, b []byte) bool {
	c := bytes.Compare(a, b)
	return (c < 0 && !r.desc) || (c > 0 && r.desc)
}

func (r *numReader) close() {
	if r.cur != nil {
		r.cur.Close()
		r.cur = nil
	}
}

// unindexed returns the ids of the queued and the wide documents, up to
// one more than limit.
func (x Index) unindexed(tx *storage.Tx, meta *Meta, limit int) (ids []string, err error) {
	if err := tx.Scan(x.pendingPrefix(), x.pendingKey(meta.PendingFrom), false, false, func(_, v []byte) (bool, error) {
		ids = append(ids, string(v))
		return len(ids) <= limit, nil
	}); err != nil {
		return nil, err
	}
	wp := x.widePrefix()
	err = tx.Scan(wp, nil, false, true, func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(wp):]))
		return len(ids) <= limit, nil
	})
	return ids, err
}

// distinctTrigrams are the needle's distinct trigrams, in their order.
func distinctTrigrams(needle []byte) [][]byte {
	var out [][]byte
	for i := 0; i+3 <= len(needle); i++ {
		t := needle[i : i+3]
		if !slices.ContainsFunc(out, func(o []byte) bool { return bytes.Equal(o, t) }) {
			out = append(out, t)
		}
	}
	return out
}

// intersectPostings appends to out the documents below nextDoc in every
// one of postings (one segment's), read from the smallest, ascending.
func intersectPostings(postings [][]byte, out []uint32, nextDoc uint32) ([]uint32, error) {
	slices.SortFunc(postings, func(a, b []byte) int { return len(a) - len(b) })
	base := len(out)
	if err := eachPosting(postings[0], func(doc uint32) {
		if doc < nextDoc {
			out = append(out, doc)
		}
	}); err != nil {
		return out[:base], err
	}
	for _, v := range postings[1:] {
		docs := out[base:]
		if len(docs) == 0 {
			break
		}
		kept, i := docs[:0], 0 // kept never passes i: docs is filtered in place
		if err := eachPosting(v, func(doc uint32) {
			for i < len(docs) && docs[i] < doc {
				i++
			}
			if i < len(docs) && docs[i] == doc {
				kept = append(kept, doc)
				i++
			}
		}); err != nil {
			return out[:base], err
		}
		out = out[:base+len(kept)]
	}
	return out, nil
}

// OrderedReader reads a needle's candidates in the order of their
// documents' order values (Texts.Order), a run of a segment at a time
// (Run): the runs that may hold the greatest values first (descending), or
// the least. A caller listing documents in that order reads runs until
// the page it has verified ends before Bound: the rest cannot hold one
// that comes earlier. Right after a store is opened, a word in a few per
// cent of the documents is then answered from the candidates of its
// newest documents rather than by a walk over every document in the
// order.
type OrderedReader struct {
	post  *postingsReader
	desc  bool
	units []orderedUnit // not read yet, in the reader's order
	// docs are the candidates of the segments read so far (each
	// segment's postings are read once, at its first run).
	docs map[uint32][]uint32
}

// orderedUnit is a run of a segment, read on its own.
type orderedUnit struct {
	sg  Segment
	run Run
}

// Ordered returns a reader of the candidates of the folded needle by their
// documents' order values, those in [least, most] asked for (a segment or
// run whose bounds lie outside is not read), and the queued and wide
// documents (candidates whatever their values: the caller reads them
// first); or ok false when the index cannot tell: a needle shorter than 3
// bytes, more than unindexed queued or wide documents, or a live segment
// whose bounds are not known yet (written before they were kept: the
// indexer measures them after an upgrade).
func (x Index) Ordered(tx *storage.Tx, needle []byte, desc bool, least, most uint64, unindexed int) (r *OrderedReader, open []string, ok bool, err error) {
	if len(needle) < 3 {
		return nil, nil, false, nil
	}
	meta, err := x.ReadMeta(tx)
	if err != nil {
		return nil, nil, false, err
	}
	for _, sg := range meta.Segments {
		if !sg.Ordered {
			return nil, nil, false, nil
		}
	}
	if open, err = x.unindexed(tx, meta, unindexed); err != nil || len(open) > unindexed {
		return nil, nil, false, err
	}
	r = &OrderedReader{post: newPostingsReader(x, meta, needle), desc: desc, docs: map[uint32][]uint32{}}
	for _, sg := range meta.Segments {
		for _, run := range meta.SegmentRuns(sg) {
			if run.Most >= least && run.Least <= most {
				r.units = append(r.units, orderedUnit{sg, run})
			}
		}
	}
	slices.SortStableFunc(r.units, func(a, b orderedUnit) int {
		if desc {
			return cmp.Compare(b.run.Most, a.run.Most)
		}
		return cmp.Compare(a.run.Least, b.run.Least)
	})
	return r, open, true, nil
}

// Bound is the greatest order value (descending; the least ascending)
// that a document of the runs not read yet may have; ok false when every
// run has been read.
func (r *OrderedReader) Bound() (v uint64, ok bool) {
	if len(r.units) == 0 {
		return 0, false
	}
	if r.desc {
		return r.units[0].run.Most, true
	}
	return r.units[0].run.Least, true
}

// Next appends to ids those of the candidates of the next run (Bound says
// whether one is left), or reports false when it has more than max (their
// ids not read).
func (r *OrderedReader) Next(tx *storage.Tx, ids []string, max int) ([]string, bool, error) {
	if len(r.units) == 0 {
		return ids, true, nil
	}
	u := r.units[0]
	r.units = r.units[1:]
	docs, read := r.docs[u.sg.ID]
	if !read {
		var err error
		if docs, err = r.post.segmentDocs(tx, u.sg, nil); err != nil {
			return ids, false, err
		}
		r.docs[u.sg.ID] = docs
	}
	// The run's part of the segment's candidates (ascending).
	from, _ := slices.BinarySearch(docs, u.run.Lo)
	to, _ := slices.BinarySearch(docs, u.run.Hi)
	if u.run.Hi < u.run.Lo {
		to = from
	}
	if to-from > max {
		return ids, false, nil
	}
	for _, doc := range docs[from:to] {
		id, err := tx.Get(r.post.x.docIDKey(doc))
		if errors.Is(err, storage.ErrNotFound) {
			continue // re-indexed or removed
		}
		if err != nil {
			return ids, false, err
		}
		ids = append(ids, string(id))
	}
	return ids, true, nil
}

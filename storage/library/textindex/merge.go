package textindex

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// mergeChunk bounds the bytes of one transaction of a merge.
const mergeChunk = 1 << 20

// Merge merges eight live segments of one size into one, as long as there
// are, and finishes a merge or deletion a crash interrupted; stopping
// ends it early (ErrStopped). Steps, each its own transaction(s): tm
// records the merge; the merged segment's keys are written under its new
// number (searches do not read it yet); tm lists it instead of its
// sources and marks them for deletion; their keys are deleted; tm forgets
// them.
func (x Index) Merge(st *storage.Store, texts Texts, stopping func() bool) error {
	for {
		if stopping() {
			return ErrStopped
		}
		var meta *Meta
		if err := st.View(st.Background(), func(tx *storage.Tx) (err error) { meta, err = x.ReadMeta(tx); return err }); err != nil {
			return err
		}
		switch {
		case len(meta.Deleting) > 0:
			for _, seg := range meta.Deleting {
				if err := st.DeletePrefixInBatches(st.Background(), x.SegmentPrefix(seg)); err != nil {
					return err
				}
			}
			if err := x.UpdateMeta(st, func(m *Meta) { m.Deleting = nil }); err != nil {
				return err
			}
			continue
		case meta.Merging != 0:
			lo, hi, err := x.writeMergedSegment(st, meta)
			if err != nil {
				return err
			}
			if err := x.UpdateMeta(st, func(m *Meta) { finishMerge(m, lo, hi) }); err != nil {
				return err
			}
			continue
		}
		if i := lastUnmeasured(meta); i >= 0 {
			// A segment written before the ranges were kept: its
			// range, read once, lets searches pass over it. The
			// newest first: the first pages read those.
			if err := x.measureSegment(st, meta.Segments[i].ID, stopping); err != nil {
				return err
			}
			continue
		}
		if i := lastUnordered(meta); i >= 0 {
			// A segment written before the order bounds were kept (its
			// range known by now): until it has them, searches in that
			// order read candidates another way (Ordered).
			if err := x.measureOrder(st, texts, meta.Segments[i], stopping); err != nil {
				return err
			}
			continue
		}
		from := segmentsToMerge(meta)
		if from == nil {
			return nil
		}
		if err := x.UpdateMeta(st, func(m *Meta) {
			m.Merging, m.MergeFrom = m.NextSeg, from
			m.NextSeg++
		}); err != nil {
			return err
		}
	}
}

// segmentsToMerge are eight or more live segments of the smallest size
// that has as many, or nil.
func segmentsToMerge(meta *Meta) []uint32 {
	byLevel := map[int][]uint32{}
	pick := -1
	for _, sg := range meta.Segments {
		l := SegmentLevel(sg.Docs)
		byLevel[l] = append(byLevel[l], sg.ID)
		if len(byLevel[l]) >= 8 && (pick < 0 || l < pick) {
			pick = l
		}
	}
	if pick < 0 {
		return nil
	}
	return byLevel[pick]
}

// measureSegment records the range of the document numbers of segment
// seg, read from its postings, if it is still live. Stopping ends it
// early (a large segment takes seconds to read).
func (x Index) measureSegment(st *storage.Store, seg uint32, stopping func() bool) error {
	lo, hi := uint32(0), uint32(0)
	if err := st.View(st.Background(), func(tx *storage.Tx) error {
		n := 0
		return tx.Scan(x.SegmentPrefix(seg), nil, false, false, func(_, v []byte) (bool, error) {
			if n++; n%1024 == 0 && stopping() {
				return false, ErrStopped
			}
			return true, eachPosting(v, func(doc uint32) { lo, hi = widen(lo, hi, doc) })
		})
	}); err != nil {
		return err
	}
	return x.UpdateMeta(st, func(m *Meta) {
		for i := range m.Segments {
			if m.Segments[i].ID == seg && m.Segments[i].Hi == unknownHi {
				m.Segments[i].Lo, m.Segments[i].Hi = lo, hi
			}
		}
	})
}

// measureOrder records the order bounds of segment sg (its range known),
// read from the order values of the documents its numbers still name, if
// it is still live and without them. Stopping ends it early.
func (x Index) measureOrder(st *storage.Store, texts Texts, sg Segment, stopping func() bool) error {
	least, most := uint64(math.MaxUint64), uint64(0)
	if err := st.View(st.Background(), func(tx *storage.Tx) error {
		n := 0
		return tx.Scan(x.DocIDPrefix(), x.docIDKey(sg.Lo), false, false, func(k, v []byte) (bool, error) {
			if doc := binary.BigEndian.Uint32(k[len(k)-4:]); doc >= sg.Hi {
				return false, nil
			}
			if n++; n%1024 == 0 && stopping() {
				return false, ErrStopped
			}
			// A number of another segment within the range is counted
			// too: the bounds are wider, never wrong.
			o, ok, err := texts.Order(tx, string(v))
			if ok {
				least, most = min(least, o), max(most, o)
			}
			return err == nil, err
		})
	}); err != nil {
		return err
	}
	return x.UpdateMeta(st, func(m *Meta) {
		for i := range m.Segments {
			if s := &m.Segments[i]; s.ID == sg.ID && !s.Ordered {
				s.Least, s.Most, s.Ordered = least, most, true
			}
		}
	})
}

// joinRuns sorts runs by their numbers and joins neighbours, two by two,
// until at most maxRuns are left.
func joinRuns(runs []Run) []Run {
	slices.SortFunc(runs, func(a, b Run) int { return cmp.Compare(a.Lo, b.Lo) })
	for len(runs) > maxRuns {
		joined := runs[:0]
		for i := 0; i < len(runs); i += 2 {
			r := runs[i]
			if i+1 < len(runs) {
				n := runs[i+1]
				r = Run{min(r.Lo, n.Lo), max(r.Hi, n.Hi), min(r.Least, n.Least), max(r.Most, n.Most)}
			}
			joined = append(joined, r)
		}
		runs = joined
	}
	return runs
}

// lastUnordered is the index of the newest segment of meta without order
// bounds, or -1.
func lastUnordered(meta *Meta) int {
	for i := len(meta.Segments) - 1; i >= 0; i-- {
		if !meta.Segments[i].Ordered {
			return i
		}
	}
	return -1
}

// lastUnmeasured is the index of the newest segment of meta whose range
// is unknown, or -1.
func lastUnmeasured(meta *Meta) int {
	for i := len(meta.Segments) - 1; i >= 0; i-- {
		if meta.Segments[i].Hi == unknownHi {
			return i
		}
	}
	return -1
}

// widen returns the range [lo, hi) grown to hold doc (empty when hi is 0).
func widen(lo, hi, doc uint32) (uint32, uint32) {
	if hi == 0 {
		return doc, doc + 1
	}
	return min(lo, doc), max(hi, doc+1)
}

// finishMerge lists a merged segment, whose documents' numbers are in
// [lo, hi), in place of its sources, which it marks for deletion.
// Its order bounds are those of its sources together (the documents it
// dropped only narrow them), unknown when one source's are.
func finishMerge(m *Meta, lo, hi uint32) {
	merged := Segment{ID: m.Merging, Lo: lo, Hi: hi, Least: math.MaxUint64, Ordered: true}
	var keep []Segment
	var runs []Run
	for _, sg := range m.Segments {
		if slices.Contains(m.MergeFrom, sg.ID) {
			merged.Docs += sg.Docs
			merged.Least, merged.Most = min(merged.Least, sg.Least), max(merged.Most, sg.Most)
			merged.Ordered = merged.Ordered && sg.Ordered
			runs = append(runs, m.SegmentRuns(sg)...)
			delete(m.Runs, sg.ID)
		} else {
			keep = append(keep, sg)
		}
	}
	if !merged.Ordered {
		merged.Least, merged.Most = 0, 0
	} else {
		if m.Runs == nil {
			m.Runs = map[uint32][]Run{}
		}
		m.Runs[merged.ID] = joinRuns(runs)
	}
	m.Segments = append(keep, merged)
	m.Deleting, m.Merging, m.MergeFrom = m.MergeFrom, 0, nil
}

// liveDocs is the set of the document numbers below nextDoc that still
// have an id.
func (x Index) liveDocs(tx *storage.Tx, nextDoc uint32) (bitset, error) {
	live := make(bitset, (int(nextDoc)+63)/64)
	np := x.DocIDPrefix()
	err := tx.Scan(np, nil, false, true, func(k, _ []byte) (bool, error) {
		if len(k) == len(np)+4 {
			if d := binary.BigEndian.Uint32(k[len(np):]); d < nextDoc {
				live.set(d)
			}
		}
		return true, nil
	})
	return live, err
}

// mergeSource is a segment being merged: a cursor over its postings.
type mergeSource struct {
	it     kv.Cursor
	prefix []byte
}

// writeMergedSegment writes segment meta.Merging: for every trigram, the
// live document numbers of meta.MergeFrom, from one snapshot, in
// transactions of about mergeChunk bytes. It returns the range of the
// numbers it wrote, [lo, hi).
func (x Index) writeMergedSegment(st *storage.Store, meta *Meta) (lo, hi uint32, _ error) {
	err := st.View(st.Background(), func(tx *storage.Tx) error {
		live, err := x.liveDocs(tx, meta.NextDoc)
		if err != nil {
			return err
		}
		var srcs []mergeSource
		for _, seg := range meta.MergeFrom {
			p := x.SegmentPrefix(seg)
			it := tx.Cursor(kv.Range{Prefix: p})
			defer it.Close()
			srcs = append(srcs, mergeSource{it, p})
		}
		target := x.SegmentPrefix(meta.Merging)
		var keys, vals [][]byte
		size := 0
		// put writes keys in one transaction or, when the engine finds
		// that too big (Badger holds 15 % of a memtable: 150 KiB with
		// a memtable_size of 1 MiB), in halves.
		var put func(keys, vals [][]byte) error
		put = func(keys, vals [][]byte) error {
			err := st.Update(st.Background(), func(w *storage.Tx) error {
				for i := range keys {
					if err := w.Put(keys[i], vals[i], 0); err != nil {
						return err
					}
				}
				return nil
			})
			if !errors.Is(err, kv.ErrTooBig) || len(keys) < 2 {
				return err
			}
			half := len(keys) / 2
			if err := put(keys[:half], vals[:half]); err != nil {
				return err
			}
			return put(keys[half:], vals[half:])
		}
		flush := func() error {
			if len(keys) == 0 {
				return nil
			}
			err := put(keys, vals)
			keys, vals, size = keys[:0], vals[:0], 0
			return err
		}
		var docs []uint32
		for {
			tri, d, err := nextMergedPostings(srcs, live, docs[:0])
			if err != nil {
				return err
			}
			if tri == nil {
				break
			}
			docs = d
			if len(docs) == 0 {
				continue
			}
			lo, hi = widen(lo, hi, docs[0])
			lo, hi = widen(lo, hi, docs[len(docs)-1])
			v := encodePostings(docs)
			keys = append(keys, append(append([]byte{}, target...), tri...))
			vals = append(vals, v)
			size += len(v) + len(target) + 3 + 32
			if size >= mergeChunk || len(keys) >= 4000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		for _, sr := range srcs {
			if err := kv.CursorErr(sr.it); err != nil {
				return err // not the end of the postings: merge nothing
			}
		}
		return flush()
	})
	return lo, hi, err
}

// nextMergedPostings reads the smallest trigram among the sources and the
// live documents of its postings in all of them (appended to docs, sorted,
// without repeats), moving past it; tri is nil at the end.
func nextMergedPostings(srcs []mergeSource, live bitset, docs []uint32) (tri []byte, _ []uint32, _ error) {
	for _, sr := range srcs {
		if sr.it.Valid() {
			t := sr.it.Key()[len(sr.prefix):]
			if tri == nil || bytes.Compare(t, tri) < 0 {
				tri = append(tri[:0:0], t...)
			}
		}
	}
	if tri == nil {
		return nil, docs, nil
	}
	for _, sr := range srcs {
		if !sr.it.Valid() || !bytes.Equal(sr.it.Key()[len(sr.prefix):], tri) {
			continue
		}
		v, err := sr.it.Value()
		if err != nil {
			return nil, docs, err
		}
		if err := eachPosting(v, func(doc uint32) {
			if live.has(doc) {
				docs = append(docs, doc)
			}
		}); err != nil {
			return nil, docs, err
		}
		sr.it.Next()
	}
	slices.Sort(docs)
	return tri, slices.Compact(docs), nil
}

// eachPosting calls fn with each document number of a posting list.
func eachPosting(v []byte, fn func(doc uint32)) error {
	doc := uint32(0)
	for len(v) > 0 {
		d, k := binary.Uvarint(v)
		if k <= 0 {
			return ErrBadIndex
		}
		v = v[k:]
		doc += uint32(d)
		fn(doc)
	}
	return nil
}

// encodePostings is the posting list of docs (ascending): uvarint deltas.
func encodePostings(docs []uint32) []byte {
	v := make([]byte, 0, len(docs)+4)
	prev := uint32(0)
	for _, d := range docs {
		v = binary.AppendUvarint(v, uint64(d-prev))
		prev = d
	}
	return v
}

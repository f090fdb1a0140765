package textindex

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Meta is the state of an index (tm, ta for the segments' ranges, tb for
// their order bounds, tc for the runs of merged segments).
type Meta struct {
	NextDoc, NextSeg uint32
	PendingFrom      uint64    // the low water mark of tp
	Segments         []Segment // live, oldest first
	Merging          uint32    // a merge under way: its new segment, or 0
	MergeFrom        []uint32  // its sources
	Deleting         []uint32  // merged segments whose keys are being deleted
	// Runs are the order bounds of parts of merged segments (tc), by
	// segment: a segment without them is one run, its own range and
	// bounds.
	Runs map[uint32][]Run
}

// Run is a part of a segment, the documents of the segment numbered in
// [Lo, Hi), and the bounds of their order values: a merged segment keeps
// those of its sources (at most maxRuns, neighbours joined), so that
// reading candidates in that order reads only the part that holds the
// newest documents of a segment that holds old ones too.
type Run struct {
	Lo, Hi      uint32
	Least, Most uint64
}

// maxRuns bounds the runs a merged segment keeps.
const maxRuns = 16

// SegmentRuns are the runs of segment sg of m (one when it has none of
// its own).
func (m *Meta) SegmentRuns(sg Segment) []Run {
	if runs := m.Runs[sg.ID]; len(runs) > 0 {
		return runs
	}
	return []Run{{sg.Lo, sg.Hi, sg.Least, sg.Most}}
}

// Segment is a live segment: its number, how many documents it holds,
// and the range of their numbers, [Lo, Hi): a search for the newest
// documents reads the segments that hold them, not every segment. A
// segment without a recorded range (written before the ranges were kept,
// or by a version that did not keep them) has the whole range (Lo 0, Hi
// unknownHi) until Merge measures it. Ordered, the segment's documents'
// order values (Texts.Order) lie in [Least, Most]; a segment without
// recorded bounds is not Ordered until Merge measures them.
type Segment struct {
	ID, Docs, Lo, Hi uint32
	Least, Most      uint64
	Ordered          bool
}

// unknownHi is the Hi of a segment whose range is not known.
const unknownHi = math.MaxUint32

// The ranges are a key of their own (ta) beside tm, whose encoding is
// unchanged: a version without them still reads the index (and what it
// writes leaves its segments without a range, measured again later).
func (m *Meta) encode() []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(m.NextDoc))
	b = binary.AppendUvarint(b, uint64(m.NextSeg))
	b = binary.AppendUvarint(b, uint64(m.Merging))
	b = binary.AppendUvarint(b, m.PendingFrom)
	b = binary.AppendUvarint(b, uint64(len(m.Segments)))
	for _, s := range m.Segments {
		b = binary.AppendUvarint(b, uint64(s.ID))
		b = binary.AppendUvarint(b, uint64(s.Docs))
	}
	for _, l := range [][]uint32{m.MergeFrom, m.Deleting} {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, v := range l {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	return b
}

// encodeRanges encodes the known ranges of the live segments (ta):
// segment, Lo and Hi in turn.
func (m *Meta) encodeRanges() []byte {
	b := []byte{1}
	for _, s := range m.Segments {
		if s.Hi != unknownHi {
			b = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(b, uint64(s.ID)), uint64(s.Lo)), uint64(s.Hi))
		}
	}
	return b
}

// encodeBounds encodes the known order bounds of the live segments (tb):
// segment, Least and Most in turn. A key of its own, as ta: a version
// without it reads the index, and what it writes leaves tb stale only for
// segments it made (numbers never reused: their bounds are simply absent)
// or merged away.
func (m *Meta) encodeBounds() []byte {
	b := []byte{1}
	for _, s := range m.Segments {
		if s.Ordered {
			b = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(b, uint64(s.ID)), s.Least), s.Most)
		}
	}
	return b
}

// encodeRuns encodes the runs of the live segments that have them (tc):
// segment, number of runs, and each run's Lo, Hi, Least and Most.
func (m *Meta) encodeRuns() []byte {
	b := []byte{1}
	for _, s := range m.Segments {
		if runs := m.Runs[s.ID]; len(runs) > 0 && s.Ordered {
			b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(s.ID)), uint64(len(runs)))
			for _, r := range runs {
				b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(r.Lo)), uint64(r.Hi))
				b = binary.AppendUvarint(binary.AppendUvarint(b, r.Least), r.Most)
			}
		}
	}
	return b
}

// put writes m (tm, ta, tb and tc).
func (x Index) put(tx *storage.Tx, m *Meta) error {
	if err := tx.Put(x.MetaKey(), m.encode(), 0); err != nil {
		return err
	}
	if err := tx.Put(x.rangesKey(), m.encodeRanges(), 0); err != nil {
		return err
	}
	if err := tx.Put(x.boundsKey(), m.encodeBounds(), 0); err != nil {
		return err
	}
	return tx.Put(x.runsKey(), m.encodeRuns(), 0)
}

// metaDecoder reads the numbers of an encoded Meta in turn.
type metaDecoder struct {
	vals []uint64
	i    int
	bad  bool // a number missing or too large
}

func (d *metaDecoder) next() uint64 {
	if d.bad = d.bad || d.i >= len(d.vals); d.bad {
		return 0
	}
	d.i++
	return d.vals[d.i-1]
}

func (d *metaDecoder) u32() uint32 {
	v := d.next()
	if v > math.MaxUint32 {
		d.bad = true
	}
	return uint32(v)
}

// ReadMeta reads the index's state (that of an empty index when none).
func (x Index) ReadMeta(tx *storage.Tx) (*Meta, error) {
	m := &Meta{NextSeg: 1}
	d, err := readNumbers(tx, x.MetaKey())
	if d == nil || err != nil {
		return m, err
	}
	m.NextDoc, m.NextSeg, m.Merging = d.u32(), d.u32(), d.u32()
	m.PendingFrom = d.next()
	for n := d.next(); n > 0 && !d.bad; n-- {
		m.Segments = append(m.Segments, Segment{ID: d.u32(), Docs: d.u32(), Hi: unknownHi})
	}
	for _, l := range []*[]uint32{&m.MergeFrom, &m.Deleting} {
		for n := d.next(); n > 0 && !d.bad; n-- {
			*l = append(*l, d.u32())
		}
	}
	if d.bad || d.i != len(d.vals) {
		return nil, ErrBadIndex
	}
	if d, err = readNumbers(tx, x.rangesKey()); err != nil {
		return nil, err
	}
	for d != nil && d.i < len(d.vals) && !d.bad {
		id, lo, hi := d.u32(), d.u32(), d.u32()
		for i := range m.Segments {
			if m.Segments[i].ID == id {
				m.Segments[i].Lo, m.Segments[i].Hi = lo, hi
			}
		}
	}
	if d != nil && d.bad {
		return nil, ErrBadIndex
	}
	if d, err = readNumbers(tx, x.boundsKey()); err != nil {
		return nil, err
	}
	for d != nil && d.i < len(d.vals) && !d.bad {
		id, least, most := d.u32(), d.next(), d.next()
		for i := range m.Segments {
			if m.Segments[i].ID == id && !d.bad {
				m.Segments[i].Least, m.Segments[i].Most, m.Segments[i].Ordered = least, most, true
			}
		}
	}
	if d != nil && d.bad {
		return nil, ErrBadIndex
	}
	if d, err = readNumbers(tx, x.runsKey()); err != nil {
		return nil, err
	}
	for d != nil && d.i < len(d.vals) && !d.bad {
		id, n := d.u32(), d.next()
		var runs []Run
		for ; n > 0 && !d.bad; n-- {
			runs = append(runs, Run{Lo: d.u32(), Hi: d.u32(), Least: d.next(), Most: d.next()})
		}
		// Only for a live segment with bounds (a version without runs
		// may have merged it away, or left it without bounds).
		if i := slices.IndexFunc(m.Segments, func(s Segment) bool { return s.ID == id }); i >= 0 && m.Segments[i].Ordered && !d.bad {
			if m.Runs == nil {
				m.Runs = map[uint32][]Run{}
			}
			m.Runs[id] = runs
		}
	}
	if d != nil && d.bad {
		return nil, ErrBadIndex
	}
	return m, nil
}

// readNumbers reads the uvarints of key after its version byte (1); nil
// when the key is absent.
func readNumbers(tx *storage.Tx, key []byte) (*metaDecoder, error) {
	b, err := tx.Get(key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || b[0] != 1 {
		return nil, ErrBadIndex
	}
	d := &metaDecoder{}
	for rest := b[1:]; len(rest) > 0; {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return nil, ErrBadIndex
		}
		d.vals, rest = append(d.vals, v), rest[n:]
	}
	return d, nil
}

// UpdateMeta changes the index's state in a transaction of its own.
func (x Index) UpdateMeta(st *storage.Store, fn func(m *Meta)) error {
	return st.Update(st.Background(), func(tx *storage.Tx) error {
		m, err := x.ReadMeta(tx)
		if err != nil {
			return err
		}
		fn(m)
		return x.put(tx, m)
	})
}

// SegmentLevel is a segment's size class: its documents' power of eight.
func SegmentLevel(docs uint32) int {
	l := 0
	for docs >= 8 {
		docs /= 8
		l++
	}
	return l
}

// Backlog is the work left: documents queued, plus one for each merge to
// come or under way. 0 means searches read only finished segments.
func (x Index) Backlog(tx *storage.Tx) (int, error) {
	meta, err := x.ReadMeta(tx)
	if err != nil {
		return 0, err
	}
	n := 0
	levels := map[int]int{}
	for _, sg := range meta.Segments {
		if levels[SegmentLevel(sg.Docs)]++; levels[SegmentLevel(sg.Docs)] == 8 {
			n++ // a merge to come
		}
	}
	if meta.Merging != 0 || len(meta.Deleting) > 0 {
		n++
	}
	err = tx.Scan(x.pendingPrefix(), x.pendingKey(meta.PendingFrom), false, true, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

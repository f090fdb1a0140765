package textindex

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Meta is the state of an index (tm).
type Meta struct {
	NextDoc, NextSeg uint32
	PendingFrom      uint64    // the low water mark of tp
	Segments         []Segment // live, oldest first
	Merging          uint32    // a merge under way: its new segment, or 0
	MergeFrom        []uint32  // its sources
	Deleting         []uint32  // merged segments whose keys are being deleted
}

// Segment is a live segment: its number, how many documents it holds,
// and the range of their numbers, [Lo, Hi): a search for the newest
// documents reads the segments that hold them, not every segment. A
// segment of an index written before the ranges were kept has the whole
// range (Lo 0, Hi unknownHi) until Merge measures it.
type Segment struct{ ID, Docs, Lo, Hi uint32 }

// unknownHi is the Hi of a segment whose range is not known yet.
const unknownHi = math.MaxUint32

// Versions of the encoded Meta: 1 without the segments' ranges (read as
// unknown), 2 with them.
const (
	metaNoRanges = 1
	metaVersion  = 2
)

func (m *Meta) encode() []byte {
	b := []byte{metaVersion}
	b = binary.AppendUvarint(b, uint64(m.NextDoc))
	b = binary.AppendUvarint(b, uint64(m.NextSeg))
	b = binary.AppendUvarint(b, uint64(m.Merging))
	b = binary.AppendUvarint(b, m.PendingFrom)
	b = binary.AppendUvarint(b, uint64(len(m.Segments)))
	for _, s := range m.Segments {
		b = binary.AppendUvarint(b, uint64(s.ID))
		b = binary.AppendUvarint(b, uint64(s.Docs))
		b = binary.AppendUvarint(b, uint64(s.Lo))
		b = binary.AppendUvarint(b, uint64(s.Hi))
	}
	for _, l := range [][]uint32{m.MergeFrom, m.Deleting} {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, v := range l {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	return b
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
	b, err := tx.Get(x.MetaKey())
	if errors.Is(err, storage.ErrNotFound) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || (b[0] != metaNoRanges && b[0] != metaVersion) {
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
	m.NextDoc, m.NextSeg, m.Merging = d.u32(), d.u32(), d.u32()
	m.PendingFrom = d.next()
	for n := d.next(); n > 0 && !d.bad; n-- {
		sg := Segment{ID: d.u32(), Docs: d.u32(), Hi: unknownHi}
		if b[0] == metaVersion {
			sg.Lo, sg.Hi = d.u32(), d.u32()
		}
		m.Segments = append(m.Segments, sg)
	}
	for _, l := range []*[]uint32{&m.MergeFrom, &m.Deleting} {
		for n := d.next(); n > 0 && !d.bad; n-- {
			*l = append(*l, d.u32())
		}
	}
	if d.bad || d.i != len(d.vals) {
		return nil, ErrBadIndex
	}
	return m, nil
}

// UpdateMeta changes the index's state in a transaction of its own.
func (x Index) UpdateMeta(st *storage.Store, fn func(m *Meta)) error {
	return st.Update(st.Background(), func(tx *storage.Tx) error {
		m, err := x.ReadMeta(tx)
		if err != nil {
			return err
		}
		fn(m)
		return tx.Put(x.MetaKey(), m.encode(), 0)
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

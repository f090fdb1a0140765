package agents

import (
	"encoding/binary"
	"encoding/json"
	"errors"
)

// Activity records are stored in a compact binary form: RecordPosts
// writes the activity of every author of every batch, and as JSON (times
// and hashes in decimal) encoding it and the store's work on its bytes
// (writes, the versions a read passes over, compactions) were a large
// part of the ingest beside the signature checks. Records written as JSON
// before are still read; the next post rewrites them.
//
// The form: activityBinary, then uvarint Posts and zigzag varints
// LastPostAt and BurstAt, then Days, Times and Skels, each as a uvarint
// count followed by its values as zigzag varint deltas from the one before
// (from 0 for the first; the lists are sorted, so the deltas are small), a
// skeleton's Hash following its At as 8 little-endian bytes.
const activityBinary = 1

var errActivityRecord = errors.New("agents: malformed activity record")

// marshalActivity encodes act in the binary form.
func marshalActivity(act *Activity) []byte {
	b := make([]byte, 0, 1+3*binary.MaxVarintLen64+len(act.Days)*3+len(act.Times)*4+len(act.Skels)*12+3)
	b = append(b, activityBinary)
	b = binary.AppendUvarint(b, uint64(act.Posts))
	b = binary.AppendVarint(b, act.LastPostAt)
	b = binary.AppendVarint(b, act.BurstAt)
	b = binary.AppendUvarint(b, uint64(len(act.Days)))
	prev := int64(0)
	for _, d := range act.Days {
		b = binary.AppendVarint(b, int64(d)-prev)
		prev = int64(d)
	}
	b = binary.AppendUvarint(b, uint64(len(act.Times)))
	prev = 0
	for _, t := range act.Times {
		b = binary.AppendVarint(b, t-prev)
		prev = t
	}
	b = binary.AppendUvarint(b, uint64(len(act.Skels)))
	prev = 0
	for _, s := range act.Skels {
		b = binary.AppendVarint(b, s.At-prev)
		prev = s.At
		b = binary.LittleEndian.AppendUint64(b, s.Hash)
	}
	return b
}

// unmarshalActivity decodes raw, binary or JSON, into act (which it resets).
func unmarshalActivity(raw []byte, act *Activity) error {
	*act = Activity{}
	if len(raw) == 0 || raw[0] != activityBinary {
		return json.Unmarshal(raw, act)
	}
	r := activityReader{b: raw[1:]}
	act.Posts = int64(r.uvarint())
	act.LastPostAt = r.varint()
	act.BurstAt = r.varint()
	if n := r.count(1); n > 0 {
		act.Days = make([]int32, n)
		prev := int64(0)
		for i := range act.Days {
			prev += r.varint()
			act.Days[i] = int32(prev)
		}
	}
	if n := r.count(1); n > 0 {
		act.Times = make([]int64, n)
		prev := int64(0)
		for i := range act.Times {
			prev += r.varint()
			act.Times[i] = prev
		}
	}
	if n := r.count(9); n > 0 {
		act.Skels = make([]Skeleton, n)
		prev := int64(0)
		for i := range act.Skels {
			prev += r.varint()
			act.Skels[i] = Skeleton{At: prev, Hash: r.uint64()}
		}
	}
	if r.bad || len(r.b) != 0 {
		*act = Activity{}
		return errActivityRecord
	}
	return nil
}

// activityReader reads the binary form; bad records the first fault (the
// reads after it return zeros).
type activityReader struct {
	b   []byte
	bad bool
}

func (r *activityReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *activityReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *activityReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.bad, r.b = true, nil
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// count reads a list's length, each element taking at least each bytes:
// a count the remaining bytes cannot hold is a fault, not an allocation.
func (r *activityReader) count(each int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/each) {
		r.bad, r.b = true, nil
		return 0
	}
	return int(n)
}

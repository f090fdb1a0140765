package kv

import "bytes"

// Cursor walks the keys of a Range and can jump (Seek) without starting a
// new Scan: what merges and intersections of several sorted key lists need
// (storage's search index reads posting lists side by side). Its methods are
// not safe for use by several goroutines at once, and a Cursor must not
// outlive its transaction.
type Cursor interface {
	// Seek moves to the first key of the range ≥ key (≤ key with
	// Reverse); a key outside the prefix moves to the range's first key
	// after it in the cursor's direction, or past the end.
	Seek(key []byte)
	// Valid reports whether the cursor is on a key of the range.
	Valid() bool
	// Key is the current key, valid until the next Seek, Next or Close.
	Key() []byte
	// Value is the current value, valid until the next Seek, Next or
	// Close (nil with KeysOnly).
	Value() ([]byte, error)
	// Next moves to the next key in the cursor's direction.
	Next()
	// Close releases the cursor.
	Close()
}

// Cursors is the optional capability of a Reader that opens cursors of its
// own (badgerkv: a Badger iterator). OpenCursor falls back to batched Scans
// for a Reader without it.
type Cursors interface {
	Cursor(r Range) Cursor
}

// OpenCursor opens a cursor over r on the reader, positioned like a Scan of
// r (at r.Start, or the first key of the prefix in r's direction). r.Limit
// is ignored.
func OpenCursor(rd Reader, r Range) Cursor {
	r.Limit = 0
	if cs, ok := rd.(Cursors); ok {
		return cs.Cursor(r)
	}
	c := &scanCursor{rd: rd, r: r}
	c.fill(r.Start, false)
	return c
}

// cursorBatch is how many keys the fallback cursor reads a Scan at a time:
// small, because a Seek drops what was read ahead.
const cursorBatch = 32

// scanCursor is a Cursor of Scans of cursorBatch keys.
type scanCursor struct {
	rd   Reader
	r    Range
	keys [][]byte
	vals [][]byte
	i    int
	more bool // the last batch was full: keys may follow
	err  error
}

// fill reads the batch starting at start (nil: the range's start), leaving
// out start itself when after is set.
func (c *scanCursor) fill(start []byte, after bool) {
	c.keys, c.vals, c.i, c.more = c.keys[:0], c.vals[:0], 0, false
	r := c.r
	r.Start, r.Limit = start, cursorBatch
	if after {
		r.Limit++
	}
	n := 0
	c.err = c.rd.Scan(r, func(k, v []byte) (bool, error) {
		n++
		if after && n == 1 && bytes.Equal(k, start) {
			return true, nil
		}
		c.keys = append(c.keys, bytes.Clone(k))
		if !r.KeysOnly {
			c.vals = append(c.vals, bytes.Clone(v))
		}
		return true, nil
	})
	c.more = n == r.Limit
	if c.err != nil {
		c.keys = c.keys[:0]
	}
}

func (c *scanCursor) Seek(key []byte) { c.fill(bytes.Clone(key), false) }

func (c *scanCursor) Valid() bool { return c.i < len(c.keys) }

func (c *scanCursor) Key() []byte { return c.keys[c.i] }

func (c *scanCursor) Value() ([]byte, error) {
	if c.r.KeysOnly {
		return nil, nil
	}
	return c.vals[c.i], nil
}

func (c *scanCursor) Next() {
	if c.i++; c.i < len(c.keys) || !c.more {
		return
	}
	c.fill(c.keys[len(c.keys)-1], true)
}

func (c *scanCursor) Close() { c.keys, c.vals = nil, nil }

// Err reports a read error of a fallback cursor (which then turned
// invalid); nil for an engine's own cursor, whose errors show as Value's.
func CursorErr(c Cursor) error {
	if sc, ok := c.(*scanCursor); ok {
		return sc.err
	}
	return nil
}

package library

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// The binary record of a saved item.

// itemRecordV1 opens an item record in the compact binary form that
// appendItemRecord writes. Every entries page decodes its items, and
// encoding/json was most of a page's storage cost. Records written before
// this form are JSON objects (their first byte is '{'); getItem still reads
// them, and the next write of the item converts it.
//
// After the version byte: the strings ID, MemberID, Type, Status, Title,
// OriginalURL, SourceDomain, Description, Author, LeadImage, FromName,
// FromAddress (uvarint length, bytes); WordCount and HighlightCount
// (varint); ReadingProgress (8 bytes, IEEE 754 big-endian); IsReadManual (1
// byte); CreatedAt, UpdatedAt; ReadAt and DeletedAt (1 byte present, then
// the time); LabelIDs (uvarint count, strings). A time is its Unix seconds
// (varint) and nanoseconds (uvarint), read back in UTC.
const itemRecordV1 = 0x01

// itemRecordV2 is itemRecordV1 followed by TrashGen (uvarint): the record
// of an item in the trash marked with an emptying (trash.go). Every other
// item keeps the first form, which earlier versions read.
const itemRecordV2 = 0x02

// itemRecordV3 and itemRecordV4 are itemRecordV1 and itemRecordV2
// followed by the bytes of the item's highlights (hlBytes, uvarint): the
// record of an item with highlights whose bytes are known. An item without
// highlights has none, and keeps the earlier forms; one with highlights
// in an earlier form was written before the bytes were kept, and has them
// unknown (unknownHighlightBytes) until a write needs them
// (knownHighlightBytes).
const (
	itemRecordV3 = 0x03
	itemRecordV4 = 0x04
)

func appendRecordString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendRecordTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func appendRecordOptTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, 0)
	}
	return appendRecordTime(append(b, 1), *t)
}

// itemRecordCap bounds the length of it's record, so that writeItem
// allocates it once instead of growing it field by field.
func itemRecordCap(it *SavedItem) int {
	n := 1 + 12*binary.MaxVarintLen64 + len(it.ID) + len(it.MemberID) + len(it.Type) + len(it.Status) +
		len(it.Title) + len(it.OriginalURL) + len(it.SourceDomain) + len(it.Description) + len(it.Author) +
		len(it.LeadImage) + len(it.FromName) + len(it.FromAddress)
	n += 2*binary.MaxVarintLen64 + 8 + 1 + 4*2*binary.MaxVarintLen64 + 2 + 3*binary.MaxVarintLen64
	for _, l := range it.LabelIDs {
		n += binary.MaxVarintLen64 + len(l)
	}
	return n
}

func appendItemRecord(b []byte, it *SavedItem) []byte {
	withBytes := it.HighlightCount > 0 && it.hlBytes >= 0
	switch {
	case it.TrashGen != 0 && withBytes:
		b = append(b, itemRecordV4)
	case it.TrashGen != 0:
		b = append(b, itemRecordV2)
	case withBytes:
		b = append(b, itemRecordV3)
	default:
		b = append(b, itemRecordV1)
	}
	for _, s := range [...]string{it.ID, it.MemberID, it.Type, it.Status, it.Title, it.OriginalURL,
		it.SourceDomain, it.Description, it.Author, it.LeadImage, it.FromName, it.FromAddress} {
		b = appendRecordString(b, s)
	}
	b = binary.AppendVarint(b, int64(it.WordCount))
	b = binary.AppendVarint(b, int64(it.HighlightCount))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(it.ReadingProgress))
	if it.IsReadManual {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendRecordTime(b, it.CreatedAt)
	b = appendRecordTime(b, it.UpdatedAt)
	b = appendRecordOptTime(b, it.ReadAt)
	b = appendRecordOptTime(b, it.DeletedAt)
	b = binary.AppendUvarint(b, uint64(len(it.LabelIDs)))
	for _, l := range it.LabelIDs {
		b = appendRecordString(b, l)
	}
	if it.TrashGen != 0 {
		b = binary.AppendUvarint(b, it.TrashGen)
	}
	if withBytes {
		b = binary.AppendUvarint(b, uint64(it.hlBytes))
	}
	return b
}

// recordReader reads a binary record. Strings are cut from one copy of the
// record, so decoding an item allocates once for all of its strings.
type recordReader struct {
	b   []byte // the record, only valid during the read
	s   string // a copy of b
	off int
	bad bool
}

func (r *recordReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.bad, r.off = true, len(r.b)
		return 0
	}
	r.off += n
	return v
}

func (r *recordReader) varint() int64 {
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.bad, r.off = true, len(r.b)
		return 0
	}
	r.off += n
	return v
}

func (r *recordReader) byte() byte {
	if r.off >= len(r.b) {
		r.bad = true
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *recordReader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)-r.off) {
		r.bad, r.off = true, len(r.b)
		return ""
	}
	s := r.s[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *recordReader) uint64() uint64 {
	if len(r.b)-r.off < 8 {
		r.bad, r.off = true, len(r.b)
		return 0
	}
	r.off += 8
	return binary.BigEndian.Uint64(r.b[r.off-8:])
}

func (r *recordReader) time() time.Time {
	sec := r.varint()
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.bad = true
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (r *recordReader) optTime() *time.Time {
	if r.byte() == 0 {
		return nil
	}
	t := r.time()
	return &t
}

var errBadItemRecord = errors.New("storage: malformed saved item record")

// parseItemRecord decodes a record of either form into it.
func parseItemRecord(b []byte, it *SavedItem) error {
	*it = SavedItem{}
	if len(b) > 0 && b[0] == '{' {
		err := json.Unmarshal(b, it)
		if it.HighlightCount > 0 {
			it.hlBytes = unknownHighlightBytes
		}
		return err
	}
	if len(b) == 0 || b[0] < itemRecordV1 || b[0] > itemRecordV4 {
		return errBadItemRecord
	}
	r := &recordReader{b: b, s: string(b), off: 1}
	for _, p := range [...]*string{&it.ID, &it.MemberID, &it.Type, &it.Status, &it.Title, &it.OriginalURL,
		&it.SourceDomain, &it.Description, &it.Author, &it.LeadImage, &it.FromName, &it.FromAddress} {
		*p = r.string()
	}
	it.WordCount = int(r.varint())
	it.HighlightCount = int(r.varint())
	it.ReadingProgress = math.Float64frombits(r.uint64())
	it.IsReadManual = r.byte() != 0
	it.CreatedAt = r.time()
	it.UpdatedAt = r.time()
	it.ReadAt = r.optTime()
	it.DeletedAt = r.optTime()
	if n := r.uvarint(); n > 0 && n <= uint64(len(b)) {
		it.LabelIDs = make([]string, n)
		for i := range it.LabelIDs {
			it.LabelIDs[i] = r.string()
		}
	} else if n > 0 {
		r.bad = true
	}
	if b[0] == itemRecordV2 || b[0] == itemRecordV4 {
		it.TrashGen = r.uvarint()
	}
	if b[0] == itemRecordV3 || b[0] == itemRecordV4 {
		if v := r.uvarint(); v <= math.MaxInt32 {
			it.hlBytes = int(v)
		} else {
			r.bad = true
		}
	} else if it.HighlightCount > 0 {
		it.hlBytes = unknownHighlightBytes
	}
	if r.bad || r.off != len(b) {
		*it = SavedItem{}
		return errBadItemRecord
	}
	return nil
}

// getItem reads the record at key (an itemKey) into it, or returns
// storage.ErrNotFound.
func getItem(tx *storage.Tx, key []byte, it *SavedItem) error {
	b, err := tx.Get(key)
	if err != nil {
		return err
	}
	return parseItemRecord(b, it)
}

// itemNamedBy reads the member's item whose id is stored at key (its URL
// key, Message-ID key or import digest key): nil when there is none, or
// when a pending emptying of the trash hides it. The member was told that
// one is deleted: a save or an import of it again makes a new item, which
// takes the key over (removeItem then leaves the key to it), rather than
// bring the old one back with its notes, highlights and labels, or give
// it more that the emptying deletes.
func itemNamedBy(tx *storage.Tx, memberID string, key []byte) (*SavedItem, error) {
	id, err := tx.Get(key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var it SavedItem
	if err := getItem(tx, itemKey(memberID, string(id)), &it); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	if hidden, err := hiddenByEmptying(tx, &it); err != nil || hidden {
		return nil, err
	}
	return &it, nil
}

// eachItem calls fn with each of the member's items with ids, in that
// order, skipping those that do not exist.
func eachItem(tx *storage.Tx, memberID string, ids []string, fn func(it *SavedItem) error) error {
	for _, id := range ids {
		var it SavedItem
		if err := getItem(tx, itemKey(memberID, id), &it); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			return err
		}
		if err := fn(&it); err != nil {
			return err
		}
	}
	return nil
}

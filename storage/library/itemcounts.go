package library

// The item writer's counts: the filter counts and the reading counts
// (fc/, filterkeys.go and counts.go) that writeItem and removeItem change
// with each item, in the item's transaction, added at its commit. Part of
// the item writer: with itemwrite.go and searchcatchup.go, the only file
// that writes keys derived from items (TestOnlyTheItemWriterWritesItemKeys).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
)

// countItemFilters adds sign to the counts of it's filter keys.
func countItemFilters(tx *storage.Tx, it *SavedItem, sign int64) {
	lt := libraryState.Of(tx)
	if lt.filterDeltas == nil {
		lt.filterDeltas = map[filterCountRef]int64{}
	}
	add := func(kind, value string) { lt.filterDeltas[filterCountRef{it.MemberID, kind, value}] += sign }
	for i, l := range it.LabelIDs {
		if !slices.Contains(it.LabelIDs[:i], l) {
			add("l", l)
		}
	}
	add("t", typeCode(it.Type))
	if it.HighlightCount > 0 {
		add("h", "")
	}
	add("s", statusCode[it.Status])
	add("d", it.SourceDomain)
	countFence(lt, it, sign)
}

// countItemReading counts the change of an item from old to it (either
// nil: new, removed) in the member's reading counts (counts.go), when the
// member's are kept for the item (readingCounted).
func countItemReading(tx *storage.Tx, old, it *SavedItem) error {
	ref := it
	if ref == nil {
		ref = old
	}
	if old != nil && it != nil && sameReading(old, it) {
		return nil // the usual update: nothing to count, nothing to read
	}
	lt := libraryState.Of(tx)
	if ok, err := readingCounted(tx, lt, ref.MemberID, ref.ID); err != nil || !ok {
		return err
	}
	if old != nil {
		countReading(lt, old, -1)
	}
	if it != nil {
		countReading(lt, it, 1)
	}
	return nil
}

// readingCounts reports whether it counts in the reading counts: an item
// of the inbox or the archive.
func readingCounts(it *SavedItem) bool {
	return it.Status == StatusActive || it.Status == StatusArchived
}

// sameReading reports whether a and b count the same in the reading counts.
func sameReading(a, b *SavedItem) bool {
	if readingCounts(a) != readingCounts(b) {
		return false
	}
	if !readingCounts(a) {
		return true
	}
	if (a.ReadAt == nil) != (b.ReadAt == nil) || (a.ReadAt != nil && !a.ReadAt.Equal(*b.ReadAt)) {
		return false
	}
	return a.WordCount == b.WordCount
}

// countReading adds sign to the reading counts of it (counts.go).
func countReading(lt *libraryTx, it *SavedItem, sign int64) {
	if !readingCounts(it) {
		return
	}
	if lt.filterDeltas == nil {
		lt.filterDeltas = map[filterCountRef]int64{}
	}
	add := func(kind, value string, d int64) {
		if d != 0 {
			lt.filterDeltas[filterCountRef{it.MemberID, kind, value}] += d
		}
	}
	words := sign * int64(it.WordCount)
	add("rw", "", words)
	if it.ReadAt == nil {
		return
	}
	add("rn", "", sign)
	add("rr", "", words)
	for _, b := range readBuckets(*it.ReadAt) {
		add(b.kind, b.value, sign)
	}
}

// readingCounted reports whether the member's reading counts count the
// item id's changes: when its keys are complete (readingCountsVersion),
// or, while the catch-up counts a store of an earlier version
// (recountReading), when the item's key is at or before the catch-up's
// cursor (those after are counted as they are when the catch-up reaches
// them). Read once a transaction.
func readingCounted(tx *storage.Tx, lt *libraryTx, memberID, id string) (bool, error) {
	if lt.readyMember == memberID && memberID != "" {
		return true, nil
	}
	if lt.readingMember != memberID || memberID == "" {
		v, err := searchVersion(tx, memberID)
		if err != nil {
			return false, err
		}
		if v >= readingCountsVersion && v <= searchIndexVersion {
			if v == searchIndexVersion {
				lt.readyMember = memberID
			}
			lt.readingMember, lt.readingCursor = memberID, nil
			lt.readingAll = true
			return true, nil
		}
		cur, err := tx.Get(readingCursorKey(memberID))
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return false, err
		}
		lt.readingMember, lt.readingCursor, lt.readingAll = memberID, cur, false
	}
	if lt.readingAll {
		return true, nil
	}
	return lt.readingCursor != nil && bytes.Compare(itemKey(memberID, id), lt.readingCursor) <= 0, nil
}

// readingCursorKey holds, while the catch-up counts the reading counts
// of a store of an earlier version, the key of the last item it counted
// (recountReading).
func readingCursorKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "rc") }

// flushFilterCounts adds the transaction's filter count changes to the
// counts (libraryBeforeCommit: before the commit).
func flushFilterCounts(tx *storage.Tx, lt *libraryTx) error {
	if len(lt.filterDeltas) == 0 {
		return nil
	}
	type change struct {
		key []byte
		d   int64
	}
	changes := make([]change, 0, len(lt.filterDeltas))
	for r, d := range lt.filterDeltas {
		if d != 0 {
			changes = append(changes, change{filterCountKey(r.memberID, r.kind, r.value), d})
		}
	}
	slices.SortFunc(changes, func(a, b change) int { return bytes.Compare(a.key, b.key) })
	for _, c := range changes {
		n, err := countAt(tx, c.key)
		if err != nil {
			return err
		}
		if err := changeCount(tx, c.key, n, n+c.d); err != nil {
			return err
		}
	}
	lt.filterDeltas = nil
	return nil
}

// errBadCount is returned for a filter count that is not 8 bytes.
var errBadCount = textindex.ErrBadIndex

// countAt reads the count at k (0 when absent).
func countAt(tx *storage.Tx, k []byte) (int64, error) {
	v, err := tx.Get(k)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(v) != 8:
		return 0, errBadCount
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// changeCount writes the count n at k, whose count countAt read as was:
// putCount's rule, but a count that drops to 0 is deleted without reading
// its key again (a count is there when it is not 0), as an item marked
// unread drops several (its instant's, second's, minute's).
func changeCount(tx *storage.Tx, k []byte, was, n int64) error {
	switch {
	case n > 0:
		return tx.Put(k, binary.BigEndian.AppendUint64(nil, uint64(n)), 0)
	case was != 0:
		return tx.Delete(k)
	}
	return nil
}

// putCount writes the count n at k (none for 0).
func putCount(tx *storage.Tx, k []byte, n int64) error {
	if n <= 0 {
		return tx.DeleteIfPresent(k)
	}
	return tx.Put(k, binary.BigEndian.AppendUint64(nil, uint64(n)), 0)
}

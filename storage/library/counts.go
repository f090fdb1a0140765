package library

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// StatusCount returns how many of the member's items have one of the
// statuses (StatusAll and StatusNotDeleted as in ItemFilter), from the
// filter counts the search keeps, but those a pending emptying of the
// trash is to delete (emptyingCut); ok is false while those are not built
// yet (a store from before them, being indexed).
func (s Store) StatusCount(ctx context.Context, memberID, status string) (n int, ok bool, err error) {
	statuses := []string{status}
	switch status {
	case StatusAll:
		statuses = []string{StatusActive, StatusArchived, StatusDeleted}
	case StatusNotDeleted:
		statuses = []string{StatusActive, StatusArchived}
	case "":
		statuses = []string{StatusActive}
	}
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		n = 0
		if ok, err = searchReady(tx, memberID); err != nil || !ok {
			return err
		}
		for _, st := range statuses {
			c, found := statusCode[st]
			if !found {
				return storage.Invalid("unknown status")
			}
			k, err := filterCount(tx, memberID, "s", c)
			if err != nil {
				return err
			}
			if st == StatusDeleted {
				cut, err := readEmptyingCut(tx, memberID)
				if err != nil {
					return err
				}
				k = max(k-cut.left, 0)
			}
			n += k
		}
		return nil
	})
	return n, ok, err
}

// Reading counts (fc/r…): kept beside the filter counts, by the same
// writer (countReading) and flush, for a member's reading statistics
// (Inboxt's me.stats). Of the member's items in the inbox and the archive
// (fc/s/A and fc/s/R count them):
//
//	fc/rw              the sum of their word counts
//	fc/rn, fc/rr       how many are read (readAt set), the sum of their word counts
//	fc/rd/<day>        how many of them were read on each day (UTC; encInt of the
//	                   Unix day), fc/rh/<hour> in each hour, fc/rm/<minute> in each
//	                   minute, fc/ri/<second><nanosecond> at each instant (readInstant)
//
// The items read after a time b are those of the days after b's, of the
// hours of b's day after b's hour, of the minutes of b's hour after b's
// minute and of the instants of b's minute after b (readAfter): at most 23
// hours and 59 minutes, the days since b that have reads (31 for a month,
// more only for items read in the future) and the instants of one minute
// (one for a batch marked read at once), whatever the library's size.
// Sums of word counts, never negative, keep putCount's rule: none for 0.

// readingCountsVersion is the first version of the search keys with the
// reading counts: a member's store of an earlier one gets them from the
// indexer's catch-up (recountReading), and its statistics are read from
// its items until then.
const readingCountsVersion = 9

// ReadingCounts are the counts a member's reading statistics are made of,
// of the items in the inbox and the archive.
type ReadingCounts struct {
	// Items and Words: the items and the sum of their word counts.
	Items, Words int64
	// Read and ReadWords: the items read (readAt set), their words.
	Read, ReadWords int64
	// ReadAfter holds, for each time asked, the items read after it.
	ReadAfter []int64
}

// ReadingCounts returns the member's reading counts, with the items read
// after each of after, from the kept counts; ok is false while the
// member's store has none yet (readingCountsVersion).
func (s Store) ReadingCounts(ctx context.Context, memberID string, after ...time.Time) (c ReadingCounts, ok bool, err error) {
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		c = ReadingCounts{}
		v, err := searchVersion(tx, memberID)
		if ok = v >= readingCountsVersion && v <= searchIndexVersion; err != nil || !ok {
			return err
		}
		for _, n := range []struct {
			to          *int64
			kind, value string
		}{
			{&c.Items, "s", statusCode[StatusActive]}, {&c.Items, "s", statusCode[StatusArchived]},
			{&c.Words, "rw", ""}, {&c.Read, "rn", ""}, {&c.ReadWords, "rr", ""},
		} {
			k, err := countAt(tx, filterCountKey(memberID, n.kind, n.value))
			if err != nil {
				return err
			}
			*n.to += k
		}
		for _, b := range after {
			n, err := readAfter(tx, memberID, b)
			if err != nil {
				return err
			}
			c.ReadAfter = append(c.ReadAfter, n)
		}
		return nil
	})
	return c, ok, err
}

// readBucket is one of the reading counts of the items read at a time.
type readBucket struct{ kind, value string }

// readBuckets are the counts (fc/rd, rh, rm, ri) of an item read at t.
func readBuckets(t time.Time) [4]readBucket {
	sec := t.Unix()
	return [4]readBucket{
		{"rd", string(encInt(nil, floorDiv(sec, 86400)))},
		{"rh", string(encInt(nil, floorDiv(sec, 3600)))},
		{"rm", string(encInt(nil, floorDiv(sec, 60)))},
		{"ri", string(readInstant(sec, t.Nanosecond()))},
	}
}

// readInstant is the value of an instant's count: encInt of its Unix
// second, then its nanosecond (4 bytes, big-endian).
func readInstant(sec int64, nsec int) []byte {
	return binary.BigEndian.AppendUint32(encInt(nil, sec), uint32(nsec))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// readAfter sums the counts of the items read after b (see the reading
// counts above).
func readAfter(tx *storage.Tx, memberID string, b time.Time) (int64, error) {
	sec := b.Unix()
	day, hour, minute := floorDiv(sec, 86400), floorDiv(sec, 3600), floorDiv(sec, 60)
	var n int64
	for _, r := range []struct {
		kind     string
		from, to []byte // to: nil for the end
	}{
		{"rd", encInt(nil, day+1), nil},
		{"rh", encInt(nil, hour+1), encInt(nil, (day+1)*24)},
		{"rm", encInt(nil, minute+1), encInt(nil, (hour+1)*60)},
		{"ri", readInstant(sec, b.Nanosecond()+1), readInstant((minute+1)*60, 0)},
	} {
		prefix := filterCountKey(memberID, r.kind, "")
		if err := tx.Scan(prefix, append(slices.Clip(prefix), r.from...), false, false, func(k, v []byte) (bool, error) {
			if r.to != nil && bytes.Compare(k[len(prefix):], r.to) >= 0 {
				return false, nil
			}
			if len(v) != 8 {
				return false, errBadCount
			}
			n += int64(binary.BigEndian.Uint64(v))
			return true, nil
		}); err != nil {
			return 0, err
		}
	}
	return n, nil
}

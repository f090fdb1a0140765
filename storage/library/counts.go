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
//	fc/rw                 the sum of their word counts
//	fc/rn, fc/rr          how many are read (readAt set), the sum of their word counts
//	fc/<span>/<n>         how many of them were read in the n-th span of time since
//	                      the Unix epoch (encInt of n; readSpans: seconds rs, minutes rm,
//	                      hours rh, UTC days rd, and 32, 1024 and 32768 days rd32, rd1k,
//	                      rd32k)
//	fc/ri/<second><nsec>  how many were read at each instant (readInstant)
//
// Each span is a whole number of the one before, so the items read after a
// time b are those of the instants of b's second after b, of the seconds
// of b's minute after b's second, and so on up, and of the 32768 days
// after b's (readAfter): at most 59 seconds, 59 minutes, 23 hours, 31 days
// and 31 of each larger span, the spans of 32768 days up to year 9999 (90:
// a later read is counted at lastCountedRead), and the distinct instants
// of one second: at most 1,000, as reads are dated to the millisecond
// (storage.Now, importReadAt), where a minute of an import's reads may
// hold 60,000 (BenchmarkReadingCountsOfAFullMinute), whatever the
// library's size; a week or a month since now reads the few spans that
// have reads. Sums of word counts, never negative, keep putCount's rule:
// none for 0.

// readingCountsPrefix starts every reading count of the member (fc/r…).
func readingCountsPrefix(memberID string) []byte {
	p := filterCountKey(memberID, "r", "")
	return p[:len(p)-1]
}

// readingCountsVersion is the first version of the search keys with the
// reading counts as they are (version 9 had them without the seconds,
// rs): a member's store of an earlier one gets them from the indexer's
// catch-up (recountReading), and its statistics are read from its items
// until then.
const readingCountsVersion = 10

// ReadingCounts are the counts a member's reading statistics are made of,
// of the items in the inbox and the archive.
type ReadingCounts struct {
	// Items and Words: the items and the sum of their word counts.
	Items, Words int64
	// Read and ReadWords: the items read (readAt set), their words.
	Read, ReadWords int64
	// ReadAfter holds, for each time asked (before lastCountedRead), the
	// items read after it.
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

// readSpans are the spans of time the reads are counted in, each a whole
// number of the one before, in seconds.
var readSpans = [...]struct {
	kind string
	secs int64
}{{"rs", 1}, {"rm", 60}, {"rh", 3600}, {"rd", 86400}, {"rd32", 32 * 86400}, {"rd1k", 1024 * 86400}, {"rd32k", 32768 * 86400}}

// readBucket is one of the reading counts of the items read at a time.
type readBucket struct{ kind, value string }

// lastCountedRead is the latest time a read is counted at: an item read
// later (an import may date a read any time) is counted as read then, so
// that the spans after now are those up to year 9999 however far apart
// the reads are, and still counted read after any time before it.
var lastCountedRead = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// readBuckets are the counts (readSpans' and the instant's) of an item
// read at t.
func readBuckets(t time.Time) [len(readSpans) + 1]readBucket {
	if t.After(lastCountedRead) {
		t = lastCountedRead
	}
	sec := t.Unix()
	var b [len(readSpans) + 1]readBucket
	for i, sp := range readSpans {
		b[i] = readBucket{sp.kind, string(encInt(nil, floorDiv(sec, sp.secs)))}
	}
	b[len(readSpans)] = readBucket{"ri", string(readInstant(sec, t.Nanosecond()))}
	return b
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
	type scan struct {
		kind     string
		from, to []byte // to: nil for the end
	}
	first := readSpans[0].secs
	scans := []scan{{"ri", readInstant(sec, b.Nanosecond()+1), readInstant((floorDiv(sec, first)+1)*first, 0)}}
	for i, sp := range readSpans {
		sc := scan{kind: sp.kind, from: encInt(nil, floorDiv(sec, sp.secs)+1)}
		if i+1 < len(readSpans) {
			up := readSpans[i+1].secs
			sc.to = encInt(nil, (floorDiv(sec, up)+1)*(up/sp.secs))
		}
		scans = append(scans, sc)
	}
	var n int64
	for _, r := range scans {
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

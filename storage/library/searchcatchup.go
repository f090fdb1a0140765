package library

// The search indexer's catch-up: the keys derived from saved items that a
// store written by an earlier version lacks (filter keys, ordered keys,
// filter counts), rebuilt from the items, and the mark that a member's
// keys are complete. With itemwrite.go, the only code that writes keys
// derived from items (TestOnlyTheItemWriterWritesItemKeys).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
)

// recountFilters sets the member's filter counts from the keys they count,
// each in a transaction that reads what it counts (a concurrent change
// conflicts with it, and one of the two retries), for a store whose counts
// are missing (written before them, or built without them); chunk values
// of a label's or domain's counts a transaction (recountValues).
func (s Store) recountFilters(memberID string, stopping func() bool, chunk int) error {
	err := s.st.Update(s.st.Background(), func(tx *storage.Tx) error {
		count := func(prefix []byte, kind, value string) error {
			n := int64(0)
			if err := tx.Scan(prefix, nil, false, true, func(_, _ []byte) (bool, error) {
				n++
				return true, nil
			}); err != nil {
				return err
			}
			return putCount(tx, filterCountKey(memberID, kind, value), n)
		}
		for _, typ := range []string{TypeArticle, TypeNewsletter} {
			if err := count(typeItemsPrefix(memberID, typ), "t", typeCode(typ)); err != nil {
				return err
			}
		}
		if err := count(highlightedItemsPrefix(memberID), "h", ""); err != nil {
			return err
		}
		for st, c := range statusCode {
			if err := count(itemIndexPrefix(memberID, st, SortCreatedAt), "s", c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Labels and domains, by the values in their keys.
	labelValue := func(suf []byte) (string, bool) {
		i := bytes.IndexByte(suf, '/')
		return string(suf[:max(i, 0)]), i > 0
	}
	domainValue := func(suf []byte) (string, bool) {
		if len(suf) < 10 || !bytes.HasSuffix(suf[:len(suf)-8], []byte{0, 1}) {
			return "", false
		}
		enc := suf[:len(suf)-10]
		return string(bytes.ReplaceAll(enc, []byte{0, 0xff}, []byte{0})), true
	}
	for _, k := range []valueCounts{
		{"l", storage.Key("u", memberID, "gql", "li", ""), func(v string) []byte { return storage.Key("u", memberID, "gql", "li", v, "") }, labelValue},
		{"d", siteItemsPrefix(memberID), func(v string) []byte { return encString(siteItemsPrefix(memberID), v) }, domainValue},
	} {
		if err := s.recountValues(memberID, k, stopping, chunk); err != nil {
			return err
		}
	}
	return nil
}

// valueCounts are the filter counts of one kind that count keys by a
// value in them (labels, domains).
type valueCounts struct {
	kind   string
	prefix []byte
	seek   func(v string) []byte // the first key of value v
	value  func(suf []byte) (string, bool)
}

// recountValues sets the counts of k's values, chunk values a
// transaction (the store's recountChunkSize, options): the values in
// [lo, next) of the keys, and the counts of that range (those of values no
// key has any more are deleted).
func (s Store) recountValues(memberID string, k valueCounts, stopping func() bool, chunk int) error {
	lo, first := "", true
	for {
		if stopping() {
			return textindex.ErrStopped
		}
		next, more := "", false
		err := s.st.Update(s.st.Background(), func(tx *storage.Tx) error {
			next, more = "", false
			counts := map[string]int64{}
			var order []string
			start := k.prefix
			if !first {
				start = k.seek(lo)
			}
			if err := tx.Scan(k.prefix, start, false, true, func(key, _ []byte) (bool, error) {
				v, ok := k.value(key[len(k.prefix):])
				if !ok {
					return true, nil
				}
				if _, seen := counts[v]; !seen {
					if len(order) == chunk {
						next, more = v, true
						return false, nil
					}
					order = append(order, v)
				}
				counts[v]++
				return true, nil
			}); err != nil {
				return err
			}
			fp := filterCountKey(memberID, k.kind, "")
			fstart := fp
			if !first {
				fstart = filterCountKey(memberID, k.kind, lo)
			}
			var stale [][]byte
			if err := tx.Scan(fp, fstart, false, true, func(key, _ []byte) (bool, error) {
				v := string(key[len(fp):])
				if more && v >= next {
					return false, nil
				}
				if counts[v] == 0 {
					stale = append(stale, append([]byte(nil), key...))
				}
				return true, nil
			}); err != nil {
				return err
			}
			for _, key := range stale {
				if err := tx.Delete(key); err != nil {
					return err
				}
			}
			for _, v := range order {
				if err := putCount(tx, filterCountKey(memberID, k.kind, v), counts[v]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !more {
			break
		}
		lo, first = next, false
	}
	return nil
}

// buildSearchKeys writes the filter keys of the member's items and queues
// them for the indexer (items saved before the index existed), in
// batches; false when the member has no item.
func (s Store) buildSearchKeys(memberID string, stopping func() bool) (items bool, _ error) {
	return s.eachItemBatch(memberID, stopping, func(tx *storage.Tx, it *SavedItem) error {
		// Not counted: recountFilters counts every item after.
		if err := writeFilterKeys(tx, new(itemScratch), nil, it, appendItemRecord(nil, it)); err != nil {
			return err
		}
		return setItemText(tx, memberID, it.ID)
	})
}

// eachItemBatch calls fn with each of the member's items, in transactions
// of a batch of items each (each reads the items it writes for, so a
// concurrent change of one conflicts and one of the two retries); false
// when the member has no item.
func (s Store) eachItemBatch(memberID string, stopping func() bool, fn func(tx *storage.Tx, it *SavedItem) error) (items bool, _ error) {
	return s.eachListedItemBatch(memberID, itemKey(memberID, ""), func(suf []byte) string { return string(suf) }, stopping, fn)
}

// eachListedItemBatch is eachItemBatch for the items that the keys under
// prefix name (idOf: the id in a key's suffix).
func (s Store) eachListedItemBatch(memberID string, prefix []byte, idOf func(suf []byte) string, stopping func() bool, fn func(tx *storage.Tx, it *SavedItem) error) (items bool, _ error) {
	var after []byte
	batch := 200 // halved while Badger finds the transaction too big
	for {
		if stopping() {
			return false, textindex.ErrStopped
		}
		var last []byte
		err := s.st.Update(s.st.Background(), func(tx *storage.Tx) error {
			last = nil
			n := 0
			start := prefix
			if after != nil {
				start = append(append([]byte{}, after...), 0)
			}
			var ids []string
			err := tx.Scan(prefix, start, false, true, func(k, _ []byte) (bool, error) {
				ids = append(ids, idOf(k[len(prefix):]))
				last = append(last[:0], k...)
				n++
				return n < batch, nil
			})
			if err != nil {
				return err
			}
			return eachItem(tx, memberID, ids, func(it *SavedItem) error { return fn(tx, it) })
		})
		if errors.Is(err, kv.ErrTooBig) && batch > 1 {
			batch /= 2
			continue
		}
		if err != nil {
			return false, err
		}
		if last == nil {
			return after != nil, nil
		}
		after = last
	}
}

// firstItemReady marks a member's index built when id is its first item
// (the indexer writes nothing for members without items).
func firstItemReady(tx *storage.Tx, memberID, id string) error {
	lt := libraryState.Of(tx)
	if lt.readyMember == memberID && memberID != "" {
		return nil
	}
	if v, err := searchVersion(tx, memberID); err != nil || v == searchIndexVersion {
		if err == nil {
			lt.readyMember = memberID
		}
		return err
	}
	prefix := itemKey(memberID, "")
	other := false
	if err := tx.Scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
		other = string(k[len(prefix):]) != id
		return !other, nil
	}); err != nil {
		return err
	}
	if other {
		return nil // the indexer builds it
	}
	lt.readyMember = memberID
	return tx.Put(textReadyKey(memberID), []byte{searchIndexVersion}, 0)
}

// catchUpSearchKeys writes the search keys a member's items lack (a store
// written by an earlier version of the index), then marks them complete;
// textindex.ErrStopped when stopping reports true between transactions.
// Counts are recounted recountChunk values a transaction (recountValues).
func (s Store) catchUpSearchKeys(memberID string, stopping func() bool, recountChunk int) error {
	var version byte
	if err := s.st.View(s.st.Background(), func(tx *storage.Tx) error {
		var err error
		version, err = searchVersion(tx, memberID)
		return err
	}); err != nil {
		return err
	}
	if version == searchIndexVersion {
		return nil
	}
	items := true
	var err error
	if version < 2 {
		if items, err = s.buildSearchKeys(memberID, stopping); err != nil {
			return err
		}
	}
	if !items {
		return nil // a member without items needs nothing (see firstItemReady)
	}
	if version >= 2 && version < highlightTitleKeysVersion {
		// The ordered filter keys with their copies (buildSearchKeys wrote
		// them for older stores): every item's, or for a store that has
		// those, the items' with highlights (hh/), which lack their title
		// keys. A member of such a store is marked built even without
		// items: its keys are all there.
		write := func(tx *storage.Tx, it *SavedItem) error {
			return writeOrderedKeys(tx, new(itemScratch), nil, it, appendItemRecord(nil, it))
		}
		if version < orderedCopiesVersion {
			_, err = s.eachItemBatch(memberID, stopping, write)
		} else {
			_, err = s.eachListedItemBatch(memberID, highlightedItemsPrefix(memberID), func(suf []byte) string {
				if len(suf) != 8 {
					return "" // no item's
				}
				return strconv.FormatUint(binary.BigEndian.Uint64(suf), 10)
			}, stopping, write)
		}
		if err != nil {
			return err
		}
	}
	if version < 3 {
		if err := s.recountFilters(memberID, stopping, recountChunk); err != nil {
			return err
		}
	}
	// The folded copies of texts that versions before 4 kept (searches
	// read the content instead, whether or not a copy is left).
	if err := s.st.DeletePrefixInBatches(s.st.Background(), textKey(memberID, "")); err != nil {
		return err
	}
	if version < readingCountsVersion || version > searchIndexVersion {
		return s.recountReading(memberID, stopping, recountChunk) // its last transaction marks the keys complete
	}
	return s.st.Update(s.st.Background(), func(tx *storage.Tx) error {
		return tx.Put(textReadyKey(memberID), []byte{searchIndexVersion}, 0)
	})
}

// recountReading counts the member's reading counts (countReading) from
// its items, for a store of a version before them, batch items a
// transaction in the order of their keys, and marks the member's keys
// complete in the last. Between them the cursor (readingCursorKey) holds
// the key of the last item counted: the writer counts the changes of the
// items up to it, and leaves the others to their batch (readingCounted).
// Each batch reads the member's items version, which every write of an
// item sets (flushItemsVersions), so that a write beside it conflicts
// with it, even of an item its scan did not see, and one of the two
// retries. Another node's catch-up may run beside it: each transaction
// reads the version and the cursor, and one that finds the counts
// complete (the other's) counts nothing more.
func (s Store) recountReading(memberID string, stopping func() bool, batch int) error {
	ctx := s.st.Background()
	// Counts of an earlier catch-up, stale since (the store was opened
	// by a version that did not keep them): no writer counts without a
	// cursor. Deleted only while there is none, in transactions that read
	// it: once a catch-up has counted a batch, its counts stay.
	p := readingCountsPrefix(memberID)
	for more := true; more; {
		if err := s.st.Update(ctx, func(tx *storage.Tx) error {
			more = false
			if done, err := readingRecounted(tx, memberID); err != nil || done {
				return err
			}
			if has, err := tx.Has(readingCursorKey(memberID)); err != nil || has {
				return err
			}
			var keys [][]byte
			if err := tx.Scan(p, nil, false, true, func(k, _ []byte) (bool, error) {
				keys = append(keys, slices.Clone(k))
				return len(keys) < staleReadingKeysPerTx, nil
			}); err != nil {
				return err
			}
			for _, k := range keys {
				if err := tx.Delete(k); err != nil {
					return err
				}
			}
			more = len(keys) == staleReadingKeysPerTx
			return nil
		}); err != nil {
			return err
		}
	}
	batch = max(batch, 1)
	for done := false; !done; {
		if stopping() {
			return textindex.ErrStopped
		}
		err := s.st.Update(ctx, func(tx *storage.Tx) error {
			recounted, err := readingRecounted(tx, memberID)
			if done = recounted; err != nil || done {
				return err
			}
			if _, err := tx.Get(itemsVersionKey(memberID)); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
			prefix := itemKey(memberID, "")
			start := prefix
			cur, err := tx.Get(readingCursorKey(memberID))
			switch {
			case err == nil:
				start = append(slices.Clone(cur), 0)
			case !errors.Is(err, storage.ErrNotFound):
				return err
			}
			var ids []string
			var last []byte
			if err := tx.Scan(prefix, start, false, true, func(k, _ []byte) (bool, error) {
				ids = append(ids, string(k[len(prefix):]))
				last = append(last[:0], k...)
				return len(ids) < batch, nil
			}); err != nil {
				return err
			}
			lt := libraryState.Of(tx)
			if err := eachItem(tx, memberID, ids, func(it *SavedItem) error {
				countReading(lt, it, 1)
				return nil
			}); err != nil {
				return err
			}
			if len(ids) < batch {
				done = true
				if err := tx.DeleteIfPresent(readingCursorKey(memberID)); err != nil {
					return err
				}
				return tx.Put(textReadyKey(memberID), []byte{searchIndexVersion}, 0)
			}
			return tx.Put(readingCursorKey(memberID), last, 0)
		})
		if errors.Is(err, kv.ErrTooBig) && batch > 1 {
			batch /= 2
			done = false // not committed
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// staleReadingKeysPerTx is how many stale reading counts recountReading
// deletes a transaction.
const staleReadingKeysPerTx = 1000

// readingRecounted reports whether the member's reading counts are
// complete (readingCountsVersion): counted by another catch-up.
func readingRecounted(tx *storage.Tx, memberID string) (bool, error) {
	v, err := searchVersion(tx, memberID)
	return v >= readingCountsVersion && v <= searchIndexVersion, err
}

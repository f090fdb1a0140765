package library

// The one writer of saved items. writeItem writes an item and every key
// derived from it, in the item's transaction, and removeItem removes them
// all: the item record and its index entries (ix/, with the record's
// copies), its label links (li/), its URL, import and Message-ID keys, its
// content, the search filter keys (sd/, sn/, ty/, hh/, oy/, oh/, ot/, ol/) and
// their counts, with the reading counts (fc/), its place in the text index's queue, the copies of
// its title, URL and domain in its highlights, its pending fetch and its
// stored images (putItemImage; see images.go). It also marks an item moved
// into the trash with the emptying that is to delete it (markTrashed,
// trash.go).
// Saving, importing, fetching and every update of an item go through
// writeItem; its counts are in itemcounts.go; TestOnlyTheItemWriterWritesItemKeys
// fails when another file writes one of those keys. The rest of this file rebuilds the derived
// keys of stores written before they existed (the search indexer's
// catch-up).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
)

// itemIndexKeys are the keys of it's index entries: one for each sort
// field, in the index of its status, built in one buffer.
func itemIndexKeys(it *SavedItem) [][]byte {
	keys, _ := appendItemIndexKeys(nil, nil, it)
	return keys
}

// appendItemIndexKeys appends it's index keys to keys, built at the end of
// buf (grown once; a key outgrowing it goes on in a larger one, those
// before keep theirs), and returns both.
func appendItemIndexKeys(keys [][]byte, buf []byte, it *SavedItem) ([][]byte, []byte) {
	keys = slices.Grow(keys, len(sortFieldCode))
	buf = slices.Grow(buf, len(sortFieldCode)*(len(it.MemberID)+32)+len(it.Title))
	for f := range sortFieldCode {
		start := len(buf)
		buf = appendItemSortValue(appendItemIndexPrefix(buf, it.MemberID, it.Status, f), it, f)
		keys = append(keys, buf[start:len(buf):len(buf)])
	}
	return keys, buf
}

// itemChange is one write of an item: what writeItem writes besides the
// record and the keys derived from the record.
type itemChange struct {
	// old is the item as stored (nil for a new item), it as it is to be.
	old, it *SavedItem
	// content, when not nil, replaces the item's content (and queues its
	// text for the search index).
	content *ItemContent
	// url is the normalised URL the item is found by again (url/), and
	// importDigest the digest an imported item without a URL is (impkey/);
	// "" for none. urlKey, when not nil, is urlKey of url as the caller
	// built it to look the URL up (an import's every item).
	url, importDigest string
	urlKey            []byte
	// messageID is the digest of a newsletter's Message-ID (msgid/, msgof/).
	messageID string
	// fetch, when not nil, is the value of a pending fetch queued for the
	// item (see fetchValue).
	fetch []byte
}

// writeItem writes c.it and every key derived from it, removing c.old's
// that no longer apply.
func writeItem(tx *storage.Tx, c itemChange) error {
	lt := libraryState.Of(tx)
	sc := takeScratch(lt)
	err := writeItemWith(tx, sc, c)
	putScratch(lt, sc)
	return err
}

func writeItemWith(tx *storage.Tx, sc *itemScratch, c itemChange) error {
	old, it := c.old, c.it
	mid := it.MemberID
	itemsChanged(tx, mid)
	if err := writeLabelLinks(tx, old, it); err != nil {
		return err
	}
	if err := markTrashed(tx, old, it); err != nil {
		return err
	}
	if old == nil {
		// Before the counts: a first item marks the member's keys
		// complete, and its reading counts are then kept (readingCounted).
		if err := firstItemReady(tx, mid, it.ID); err != nil {
			return err
		}
	}
	sc.rec = appendItemRecord(slices.Grow(sc.rec[:0], itemRecordCap(it)), it)
	rec := sc.rec
	if err := writeIndexEntries(tx, sc, old, it, rec); err != nil {
		return err
	}
	if err := putFilterKeys(tx, sc, old, it, rec); err != nil {
		return err
	}
	// A new creation date queues the text too: each index segment keeps
	// the bounds of its items' dates, which a word's first page stops by
	// (textorder.go).
	if c.content != nil || (old != nil && (old.Title != it.Title || old.Description != it.Description || !old.CreatedAt.Equal(it.CreatedAt))) {
		if err := setItemText(tx, mid, it.ID); err != nil {
			return err
		}
	}
	if old != nil && (old.Title != it.Title || old.OriginalURL != it.OriginalURL || old.SourceDomain != it.SourceDomain) {
		// Highlights copy these (their pages and search read no item).
		left, err := syncHighlightCopies(tx, it)
		if err != nil {
			return err
		}
		if left {
			lt := libraryState.Of(tx)
			lt.highlightsLeft = append(lt.highlightsLeft, [2]string{mid, it.ID})
		}
	}
	if err := tx.Put(itemKey(mid, it.ID), rec, 0); err != nil {
		return err
	}
	if err := writeLookupKeys(tx, c); err != nil {
		return err
	}
	if c.fetch != nil {
		if err := tx.Put(fetchKey(mid, it.ID), c.fetch, 0); err != nil {
			return err
		}
	}
	if c.content != nil && (old != nil || *c.content != (ItemContent{})) {
		// A new item without content has no content record (an import
		// without pages: one key less for each of its items), read as
		// empty (ItemContent, ItemHTML).
		v, err := sc.contentJSON(c.content)
		if err != nil {
			return err
		}
		if err := tx.Put(contentKey(mid, it.ID), v, 0); err != nil {
			return err
		}
	}
	return nil
}

// writeLabelLinks writes the label links (li/) it has and old had not,
// and removes those old had and it has not.
func writeLabelLinks(tx *storage.Tx, old, it *SavedItem) error {
	var had []string
	if old != nil {
		had = old.LabelIDs
	}
	for _, l := range had {
		if !contains(it.LabelIDs, l) {
			if err := tx.Delete(labelItemKey(it.MemberID, l, it.ID)); err != nil {
				return err
			}
		}
	}
	for i, l := range it.LabelIDs {
		if !contains(had, l) && !contains(it.LabelIDs[:i], l) {
			if err := tx.Put(labelItemKey(it.MemberID, l, it.ID), nil, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeIndexEntries writes it's index entries (each with rec, its record,
// as a copy), removing old's that no longer apply; the keys are built in
// sc.
func writeIndexEntries(tx *storage.Tx, sc *itemScratch, old, it *SavedItem, rec []byte) error {
	sc.keys, sc.keyBuf = appendItemIndexKeys(sc.keys[:0], sc.keyBuf[:0], it)
	keys := sc.keys
	if old != nil {
		keep := make(map[string]bool, len(keys))
		for _, k := range keys {
			keep[string(k)] = true
		}
		for _, k := range itemIndexKeys(old) {
			if !keep[string(k)] {
				if err := tx.Delete(k); err != nil {
					return err
				}
			}
		}
	}
	lt := libraryState.Of(tx)
	return tx.PutEach(keys, copyWithin(&lt.indexCopyBytes, maxIndexCopyBytes, rec, len(keys)), 0)
}

// copyWithin is rec when n more copies of it keep the copies a
// transaction wrote (*used) within limit, else nil. A transaction that
// touches many items (a label on thousands of them, an import's batch)
// would outgrow Badger's limit with several copies of each: past the
// budget the keys carry no copy, and pages look those items up until their
// next write. The status indexes and the ordered filter keys have budgets
// of their own, so that the ordered keys' copies never take the inbox's.
func copyWithin(used *int, limit int, rec []byte, n int) []byte {
	if *used+n*len(rec) > limit {
		return nil
	}
	*used += n * len(rec)
	return rec
}

// writeLookupKeys points the keys an item is found by again (its URL, an
// import's digest, a newsletter's Message-ID) at it.
func writeLookupKeys(tx *storage.Tx, c itemChange) error {
	mid, id := c.it.MemberID, []byte(c.it.ID)
	if c.url != "" {
		k := c.urlKey
		if k == nil {
			k = urlKey(mid, c.url)
		}
		if err := tx.Put(k, id, 0); err != nil {
			return err
		}
	}
	if c.importDigest != "" {
		if err := tx.Put(importKeyKey(mid, c.importDigest), id, 0); err != nil {
			return err
		}
	}
	if c.messageID != "" {
		if err := tx.Put(messageIDKey(mid, c.messageID), id, 0); err != nil {
			return err
		}
		if err := tx.Put(itemMessageIDKey(mid, c.it.ID), []byte(c.messageID), 0); err != nil {
			return err
		}
	}
	return nil
}

// updateItem writes it in place of old (both the member's item as read in
// tx), moving its updatedAt to t.
func updateItem(tx *storage.Tx, old, it *SavedItem, t time.Time) error {
	it.UpdatedAt = t
	return writeItem(tx, itemChange{old: old, it: it})
}

// unlabelItems takes label off the member's items with ids (a label being
// deleted), moving their updatedAt; the link of an id whose item is gone,
// or does not list the label, is removed all the same.
func unlabelItems(tx *storage.Tx, memberID, label string, ids []string) error {
	t := storage.Now()
	for _, id := range ids {
		var old SavedItem
		err := getItem(tx, itemKey(memberID, id), &old)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		if err != nil || !contains(old.LabelIDs, label) {
			if err := tx.Delete(labelItemKey(memberID, label, id)); err != nil {
				return err
			}
		}
		if err != nil {
			continue // gone: only its link was left
		}
		it := old
		it.LabelIDs = nil
		for _, x := range old.LabelIDs {
			if x != label {
				it.LabelIDs = append(it.LabelIDs, x)
			}
		}
		if err := updateItem(tx, &old, &it, t); err != nil {
			return err
		}
	}
	return nil
}

// maxIndexCopyBytes bounds the index copies one transaction writes, well
// under Badger's transaction limit (15 % of a memtable: 1.2 MiB with the
// default 8 MiB).
const maxIndexCopyBytes = 512 << 10

// maxOrderedCopyBytes bounds the ordered filter keys' copies of records one
// transaction writes (beside maxIndexCopyBytes: both well under Badger's
// limit).
const maxOrderedCopyBytes = 256 << 10

// removeItem removes an item and every key derived from it (writeItem's),
// its highlights and its pending fetch, and leaves its tombstone.
func removeItem(tx *storage.Tx, it *SavedItem) error {
	mid := it.MemberID
	itemsChanged(tx, mid)
	if err := leaveEmptying(tx, it, nil); err != nil {
		return err
	}
	if err := deleteItemSearch(tx, it); err != nil {
		return err
	}
	for _, k := range itemIndexKeys(it) {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	for _, l := range it.LabelIDs {
		if err := tx.Delete(labelItemKey(mid, l, it.ID)); err != nil {
			return err
		}
	}
	if it.OriginalURL != "" {
		if id, err := tx.Get(urlKey(mid, it.OriginalURL)); err == nil && string(id) == it.ID {
			if err := tx.Delete(urlKey(mid, it.OriginalURL)); err != nil {
				return err
			}
		}
	}
	if it.Type == TypeNewsletter {
		if err := deleteItemMessageID(tx, mid, it.ID); err != nil {
			return err
		}
	}
	if err := deleteItemHighlights(tx, mid, it.ID); err != nil {
		return err
	}
	if err := tx.Delete(contentKey(mid, it.ID)); err != nil {
		return err
	}
	if err := tx.Delete(fetchKey(mid, it.ID)); err != nil {
		return err
	}
	if err := removeItemImages(tx, mid, it.ID); err != nil {
		return err
	}
	if err := putTombstone(tx, it); err != nil {
		return err
	}
	return tx.Delete(itemKey(mid, it.ID))
}

// deleteItemMessageID drops the Message-ID entry of a newsletter, so that
// the message, delivered again, is saved again.
func deleteItemMessageID(tx *storage.Tx, memberID, itemID string) error {
	digest, err := tx.Get(itemMessageIDKey(memberID, itemID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	k := messageIDKey(memberID, string(digest))
	if id, err := tx.Get(k); err == nil && string(id) == itemID {
		if err := tx.Delete(k); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return tx.Delete(itemMessageIDKey(memberID, itemID))
}

// orderedFilterKeys are it's ordered filter keys (orderedKeys) and their
// value (with rec, the item's record, as a copy when not nil).
func orderedFilterKeys(it *SavedItem, rec []byte) (keys [][]byte, value []byte) {
	return orderedKeys(it), orderedValue(it.Status, it.SourceDomain, rec)
}

// orderedKeys are it's ordered filter keys (see orderedTypePrefix), each
// ending in the item's createdAt sort value but the title key (ot/, in its
// title's), built in one buffer as itemIndexKeys are.
func orderedKeys(it *SavedItem) [][]byte {
	keys, _ := appendOrderedKeys(nil, nil, it)
	return keys
}

// appendOrderedKeys appends it's ordered filter keys to keys, built at the
// end of buf as appendItemIndexKeys builds the index keys.
func appendOrderedKeys(keys [][]byte, buf []byte, it *SavedItem) ([][]byte, []byte) {
	keys = slices.Grow(keys, 3+len(it.LabelIDs))
	buf = slices.Grow(buf, (2+len(it.LabelIDs))*(2*len(it.MemberID)+32))
	add := func(b []byte, f SortField) {
		start := len(buf)
		buf = appendItemSortValue(b, it, f)
		keys = append(keys, buf[start:len(buf):len(buf)])
	}
	add(appendOrderedTypePrefix(buf, it.MemberID, it.Type), SortCreatedAt)
	if it.HighlightCount > 0 {
		add(appendOrderedHighlightedPrefix(buf, it.MemberID), SortCreatedAt)
		add(appendHighlightedTitlePrefix(buf, it.MemberID), SortTitle)
	}
	for i, l := range it.LabelIDs {
		if !slices.Contains(it.LabelIDs[:i], l) {
			add(appendOrderedLabelPrefix(buf, it.MemberID, l), SortCreatedAt)
		}
	}
	return keys, buf
}

// writeOrderedKeys writes it's ordered filter keys, with rec (it's record)
// as their copy when not nil, and removes old's that no longer apply (old
// is nil for a new item); the keys and their value are built in sc. Every
// key is written: its copy follows each write of the item (and one
// without a copy replaces an older copy).
func writeOrderedKeys(tx *storage.Tx, sc *itemScratch, old, it *SavedItem, rec []byte) error {
	var oldKeys [][]byte
	if old != nil {
		oldKeys = orderedKeys(old)
	}
	sc.keys, sc.keyBuf = appendOrderedKeys(sc.keys[:0], sc.keyBuf[:0], it)
	keys := sc.keys
	lt := libraryState.Of(tx)
	sc.value = appendOrderedValue(sc.value[:0], it.Status, it.SourceDomain, copyWithin(&lt.orderedCopyBytes, maxOrderedCopyBytes, rec, len(keys)))
	value := sc.value
	for _, k := range oldKeys {
		if !slices.ContainsFunc(keys, func(n []byte) bool { return bytes.Equal(n, k) }) {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
	}
	return tx.PutEach(keys, value, 0)
}

// putFilterKeys writes the filter keys of it (rec: its record), removing
// old's that no longer apply (old is nil for a new item), and counts the
// change (fc/).
func putFilterKeys(tx *storage.Tx, sc *itemScratch, old, it *SavedItem, rec []byte) error {
	if old != nil {
		countItemFilters(tx, old, -1)
	}
	countItemFilters(tx, it, 1)
	if err := countItemReading(tx, old, it); err != nil {
		return err
	}
	return writeFilterKeys(tx, sc, old, it, rec)
}

// writeFilterKeys is putFilterKeys without the counts (sc: buffers for
// the ordered keys, see itemScratch).
func writeFilterKeys(tx *storage.Tx, sc *itemScratch, old, it *SavedItem, rec []byte) error {
	mid := it.MemberID
	if err := writeOrderedKeys(tx, sc, old, it, rec); err != nil {
		return err
	}
	if old == nil || old.SourceDomain != it.SourceDomain {
		if old != nil {
			if err := tx.Delete(siteItemKey(mid, old.SourceDomain, it.ID)); err != nil {
				return err
			}
		}
		if err := tx.Put(siteItemKey(mid, it.SourceDomain, it.ID), nil, 0); err != nil {
			return err
		}
		if err := putSiteName(tx, mid, it.SourceDomain); err != nil {
			return err
		}
	}
	if old == nil || old.Type != it.Type {
		if old != nil {
			if err := tx.Delete(encUint64(typeItemsPrefix(mid, old.Type), idBytes(it.ID))); err != nil {
				return err
			}
		}
		if err := tx.Put(encUint64(typeItemsPrefix(mid, it.Type), idBytes(it.ID)), nil, 0); err != nil {
			return err
		}
	}
	had, has := old != nil && old.HighlightCount > 0, it.HighlightCount > 0
	if old == nil || had != has {
		k := encUint64(highlightedItemsPrefix(mid), idBytes(it.ID))
		if has {
			return tx.Put(k, nil, 0)
		}
		if old != nil {
			return tx.Delete(k)
		}
	}
	return nil
}

// putSiteName writes the member's site name key of domain, once a
// transaction: an import's batch saves many items of few sites. Nothing
// removes a site name but the rebuild of every filter key.
func putSiteName(tx *storage.Tx, memberID, domain string) error {
	lt := libraryState.Of(tx)
	site := [2]string{memberID, domain}
	switch {
	case lt.siteName == site || lt.siteNames[site]:
		return nil
	case lt.siteName == [2]string{}:
		lt.siteName = site // a save's one site allocates nothing more
	default:
		if lt.siteNames == nil {
			lt.siteNames = map[[2]string]bool{}
		}
		lt.siteNames[site] = true
	}
	return tx.Put(siteNameKey(memberID, domain), nil, 0)
}

// deleteItemSearch takes an item out of the text index and removes its
// filter keys.
func deleteItemSearch(tx *storage.Tx, it *SavedItem) error {
	mid := it.MemberID
	countItemFilters(tx, it, -1)
	if err := countItemReading(tx, it, nil); err != nil {
		return err
	}
	if err := memberIndex(mid).Remove(tx, it.ID); err != nil {
		return err
	}
	ordered := orderedKeys(it)
	for _, k := range append(ordered,
		siteItemKey(mid, it.SourceDomain, it.ID), encUint64(typeItemsPrefix(mid, it.Type), idBytes(it.ID)),
		encUint64(highlightedItemsPrefix(mid), idBytes(it.ID))) {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// itemsVersionKey holds the version of the member's items: a new random
// value at every commit that writes or removes one (absent until the
// first), which a cached answer of a page is checked against (pageCache).
func itemsVersionKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "iv") }

// itemsChanged notes that tx writes or removes an item of memberID.
func itemsChanged(tx *storage.Tx, memberID string) {
	if lt := libraryState.Of(tx); !slices.Contains(lt.itemMembers, memberID) {
		lt.itemMembers = append(lt.itemMembers, memberID)
	}
}

// flushItemsVersions gives the items of the members tx changed a new
// version, once a transaction: random (an update that needs no id does
// not wait for the node's id slot), written and never read, so that
// concurrent writers do not conflict on it (on Badger; PostgreSQL's
// serializable transactions retry as they do for the filter counts).
func flushItemsVersions(tx *storage.Tx, lt *libraryTx) error {
	for _, m := range lt.itemMembers {
		v := make([]byte, 12)
		_, _ = rand.Read(v) // never fails (it crashes the process instead)
		if err := tx.Put(itemsVersionKey(m), v, 0); err != nil {
			return err
		}
	}
	lt.itemMembers = nil
	return nil
}

// maxHighlightCopyBytes bounds the highlights one transaction rewrites to
// keep their copies of an item's title, URL and domain in step (see
// syncHighlightCopies), like maxIndexCopyBytes for the index copies.
const maxHighlightCopyBytes = 512 << 10

// syncHighlightCopies rewrites the highlights of it whose copies of its
// title, URL or domain differ, with a new updatedAt, so their pages, search
// and incremental sync see the item as it is. Past maxHighlightCopyBytes in
// the transaction (an item with very many or very long highlights) it stops
// and reports that some are left; update then finishes them after the
// commit, in transactions of their own.
func syncHighlightCopies(tx *storage.Tx, it *SavedItem) (left bool, err error) {
	prefix := storage.Key("u", it.MemberID, "gql", "ih", it.ID, "")
	ids, err := tx.Suffixes(prefix)
	if err != nil || len(ids) == 0 {
		return false, err
	}
	t := storage.Now()
	for _, id := range ids {
		b, err := tx.Get(highlightKey(it.MemberID, id))
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		var h Highlight
		if err := json.Unmarshal(b, &h); err != nil {
			return false, err
		}
		if h.ItemTitle == it.Title && h.ItemURL == it.OriginalURL && h.ItemDomain == it.SourceDomain {
			continue
		}
		lt := libraryState.Of(tx)
		if lt.highlightCopyBytes > 0 && lt.highlightCopyBytes+len(b) > maxHighlightCopyBytes {
			return true, nil
		}
		lt.highlightCopyBytes += len(b)
		old := highlightIndexKeys(it.MemberID, &h)[1]
		h.ItemTitle, h.ItemURL, h.ItemDomain = it.Title, it.OriginalURL, it.SourceDomain
		if t.After(h.UpdatedAt) {
			h.UpdatedAt = t
		}
		if err := tx.Delete(old); err != nil {
			return false, err
		}
		if err := tx.Put(highlightIndexKeys(it.MemberID, &h)[1], nil, 0); err != nil {
			return false, err
		}
		if err := tx.PutJSON(highlightKey(it.MemberID, h.ID), &h, 0); err != nil {
			return false, err
		}
	}
	return false, nil
}

// finishHighlightCopies brings the highlights of the items (member id, item
// id) that a transaction left out (see syncHighlightCopies) in step, each
// part in a transaction of its own. If the process stops before, those
// highlights show the item's previous title until its next change.
func (s Store) finishHighlightCopies(ctx context.Context, items [][2]string) error {
	for _, ref := range items {
		for left := true; left; {
			err := s.st.Update(ctx, func(tx *storage.Tx) error {
				left = false
				var it SavedItem
				err := getItem(tx, itemKey(ref[0], ref[1]), &it)
				if errors.Is(err, storage.ErrNotFound) {
					return nil
				}
				if err != nil {
					return err
				}
				left, err = syncHighlightCopies(tx, &it)
				return err
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// setItemText queues an item whose searchable text (title, description or
// content text) this transaction changes for the indexer, which reads the
// text the item then has.
func setItemText(tx *storage.Tx, memberID, id string) error {
	seq, err := memberIndex(memberID).Queue(tx, id)
	if err != nil {
		return err
	}
	lt := libraryState.Of(tx)
	lt.addTextMember(memberID)
	if seq%textBacklogCheckEvery == 0 && !contains(lt.backlogMembers, memberID) {
		// Once a commit: an import's batch passes several multiples.
		lt.backlogMembers = append(lt.backlogMembers, memberID)
	}
	return nil
}

// moveURLKey moves the URL key of the member's item itemID, saved with url,
// from the digest of url as it was saved (legacyURLKey, before tracking
// parameters were dropped) to urlKey's. Another item holding the new key
// keeps it. It reports whether it wrote the new key (migrateURLKeys).
func moveURLKey(tx *storage.Tx, memberID, itemID, url string) (bool, error) {
	old := legacyURLKey(memberID, url)
	if id, err := tx.Get(old); err == nil && string(id) == itemID {
		if err := tx.Delete(old); err != nil {
			return false, err
		}
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return false, err
	}
	key := urlKey(memberID, url)
	if _, err := tx.Get(key); err == nil {
		return false, nil // moved before, or held by the same article saved again
	} else if !errors.Is(err, storage.ErrNotFound) {
		return false, err
	}
	return true, tx.Put(key, []byte(itemID), 0)
}

// putItemImage stores data as the next image of the member's item itemID
// (img's URL, media type and size), and adds its size to the member's
// image bytes: unless the item is gone (storage.ErrNotFound), already has
// an image of that URL (its number is returned, added false), has
// MaxItemImages, or the bytes would pass quota (ErrImageQuota).
func putItemImage(tx *storage.Tx, memberID, itemID string, img ItemImage, data []byte, quota int64) (n int, added bool, err error) {
	if ok, err := tx.Has(itemKey(memberID, itemID)); err != nil || !ok {
		if err == nil {
			err = storage.ErrNotFound
		}
		return 0, false, err
	}
	list, err := itemImages(tx, memberID, itemID)
	if err != nil {
		return 0, false, err
	}
	for n, x := range list {
		if x.URL == img.URL {
			return n, false, nil
		}
	}
	if len(list) >= MaxItemImages {
		return 0, false, storage.Invalid("an item keeps at most %d images", MaxItemImages)
	}
	used, err := countAt(tx, imageUsageKey(memberID))
	if err != nil {
		return 0, false, err
	}
	if used+int64(len(data)) > quota {
		return 0, false, ErrImageQuota
	}
	n = len(list)
	if err := tx.Put(imageKey(memberID, itemID, n), data, 0); err != nil {
		return 0, false, err
	}
	if err := tx.PutJSON(imageListKey(memberID, itemID), append(list, img), 0); err != nil {
		return 0, false, err
	}
	return n, true, putCount(tx, imageUsageKey(memberID), used+int64(len(data)))
}

// removeItemImages removes the item's stored images and takes their bytes
// off the member's.
func removeItemImages(tx *storage.Tx, memberID, itemID string) error {
	list, err := itemImages(tx, memberID, itemID)
	if err != nil || len(list) == 0 {
		return err
	}
	var size int64
	for n, img := range list {
		size += int64(img.Size)
		if err := tx.Delete(imageKey(memberID, itemID, n)); err != nil {
			return err
		}
	}
	if err := tx.Delete(imageListKey(memberID, itemID)); err != nil {
		return err
	}
	used, err := countAt(tx, imageUsageKey(memberID))
	if err != nil {
		return err
	}
	return putCount(tx, imageUsageKey(memberID), used-size)
}

// StoreItemImage stores data as the image the item's content names by src,
// its media type sniffed from its bytes: unless it is not one of the
// raster types the reader shows (ImageType: storage.InvalidError), the
// item is gone (storage.ErrNotFound), already has it, has MaxItemImages, or
// the member's images would pass quota bytes (ErrImageQuota). It returns
// the image's number.
func (s Store) StoreItemImage(ctx context.Context, memberID, itemID, src string, data []byte, quota int64) (int, error) {
	n, _, err := s.storeItemImage(ctx, s.st.Update, memberID, itemID, src, data, quota)
	return n, err
}

// StoreImportedImage is StoreItemImage for an import, committed without
// waiting for the disk as the import's batches are (storage.UpdateAsync):
// the job's update after its batch's images, which waits, brings them
// there, and a power loss before it leaves them to be stored again when
// the job resumes (ImportJob.ImagesFrom). added is false when the item
// had the image already (the same export imported again): the job counts
// only the images it added.
func (s Store) StoreImportedImage(ctx context.Context, memberID, itemID, src string, data []byte, quota int64) (added bool, err error) {
	_, added, err = s.storeItemImage(ctx, s.st.UpdateAsync, memberID, itemID, src, data, quota)
	return added, err
}

func (s Store) storeItemImage(ctx context.Context, update func(context.Context, func(*storage.Tx) error) error, memberID, itemID, src string, data []byte, quota int64) (n int, added bool, err error) {
	typ := ImageType(data)
	if typ == "" {
		return 0, false, storage.Invalid("not a PNG, JPEG, GIF, WebP or AVIF image")
	}
	err = update(ctx, func(tx *storage.Tx) error {
		var err error
		n, added, err = putItemImage(tx, memberID, itemID, ItemImage{URL: src, Type: typ, Size: len(data)}, data, quota)
		return err
	})
	return n, added, err
}

package library

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library/textindex"
)

// Search filters select items by keys of their own, derived from the
// items by writeItem (itemwrite.go). All under u/<member>/gql/:
//
//	fc/...                         the filter counts (see filterCountKey)
//	sd/<domain>\x00\x01<id>        empty: the items of a source domain (encString, 8-byte id)
//	sn/<domain>                    empty: a domain that items have had (never deleted: a
//	                               site: search reads this short list, then sd/ of those that match)
//	ty/<A|N>/<id>                  empty: articles, newsletters
//	hh/<id>                        empty: the items with highlights
//	oy/<A|N>/<createdAt><id>       status code, domain: articles, newsletters, in the
//	                               order of createdAt (see orderedTypePrefix)
//	oh/<createdAt><id>             status code, domain: the items with highlights, so
//	                               ordered
//	ot/<title><id>                 status code, domain: the items with highlights in the
//	                               order of their title (highlightedTitlePrefix)
//	ol/<label id>/<createdAt><id>  status code, domain: the items of a label, so ordered
//	tv                             searchIndexVersion once every item has its filter keys,
//	                               counts and a place in the text index or its queue
//	rc                             the catch-up's cursor while it counts the reading
//	                               counts (recountReading)
//	tt/<item id>                   (before version 4) a folded copy of the item's text,
//	                               deleted by the indexer's catch-up
//
// The storage engine seam (docs/storage-engines.md): these keys and the text
// index's are ordinary keys of the one ordered transactional store, read
// and written through Tx like every repository's, so they work unchanged
// on any engine of that interface and every node of a shared store sees
// the same index.

func textKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "tt", id) }

func textReadyKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "tv") }

func siteItemsPrefix(memberID string) []byte {
	return storage.Key("u", memberID, "gql", "sd", "")
}

func siteNameKey(memberID, domain string) []byte {
	return storage.Key("u", memberID, "gql", "sn", domain)
}

func siteItemKey(memberID, domain, id string) []byte {
	return encUint64(encString(siteItemsPrefix(memberID), domain), idBytes(id))
}

func typeItemsPrefix(memberID, typ string) []byte {
	c := "A"
	if typ == TypeNewsletter {
		c = "N"
	}
	return storage.Key("u", memberID, "gql", "ty", c, "")
}

func highlightedItemsPrefix(memberID string) []byte {
	return storage.Key("u", memberID, "gql", "hh", "")
}

// Filter keys ordered like a page sorted by createdAt (oy/, oh/, ol/): a
// search whose smallest filter is a type, has:highlights or a label walks
// that filter's items in the page's order and checks the others on each,
// instead of walking every item of the statuses (planOrdered). createdAt
// is the default order (Inboxt's savedAt) and never changes with an item's
// writes, so the keys move only when the type, the highlights, the labels,
// the status or the domain do (every change of those goes through
// writeItem). The value (orderedValue) is the item's status code, its source
// domain in lower case and a copy of its record: a walk passes over the
// items of other statuses, and those a site: filter does not select,
// without reading them, and reads the others from the walk itself, as the
// inbox reads its items from the status index (ix/), without a point
// lookup of each item.
func orderedTypePrefix(memberID, typ string) []byte {
	return appendOrderedTypePrefix(nil, memberID, typ)
}

func appendOrderedTypePrefix(b []byte, memberID, typ string) []byte {
	return storage.AppendKey(b, "u", memberID, "gql", "oy", typeCode(typ), "")
}

func orderedHighlightedPrefix(memberID string) []byte {
	return appendOrderedHighlightedPrefix(nil, memberID)
}

func appendOrderedHighlightedPrefix(b []byte, memberID string) []byte {
	return storage.AppendKey(b, "u", memberID, "gql", "oh", "")
}

// highlightedTitlePrefix is the prefix of the title keys (ot/) of the
// items with highlights: ordered filter keys that end in the item's title
// sort value (as its title index entry, ix/), not its createdAt, written
// and removed with the others (writeOrderedKeys), so that a key moves with
// its item's title as well. A page of highlights sorted by their item's
// title walks them (highlighttitle.go) and meets only items that have
// highlights, however many have none.
func highlightedTitlePrefix(memberID string) []byte {
	return appendHighlightedTitlePrefix(nil, memberID)
}

func appendHighlightedTitlePrefix(b []byte, memberID string) []byte {
	return storage.AppendKey(b, "u", memberID, "gql", "ot", "")
}

func orderedLabelPrefix(memberID, labelID string) []byte {
	return appendOrderedLabelPrefix(nil, memberID, labelID)
}

func appendOrderedLabelPrefix(b []byte, memberID, labelID string) []byte {
	return storage.AppendKey(b, "u", memberID, "gql", "ol", labelID, "")
}

// searchIndexVersion is tv's value once a member's items have every key
// this version of the index reads; another value (or none) makes the
// indexer build them again (its writes are idempotent). Version 2 lacked
// the filter counts (fc/), which the indexer then counts; versions 2 and
// 3 kept a folded copy of each item's text (tt/), which it deletes;
// versions before 7 lacked the ordered filter keys (oy/, oh/, ol/), the
// domain in their values (5) or the record's copy (6), and versions
// before 8 the title keys (ot/), which it writes; versions before 9
// lacked the reading counts (fc/r…, counts.go), and version 9 their
// seconds (rs), which it counts.
const searchIndexVersion = 10

// highlightTitleKeysVersion is the first version with the title keys of
// the items with highlights (ot/): before it, a page of highlights sorted
// by title walks the status indexes instead (highlighttitle.go).
const highlightTitleKeysVersion = 8

// orderedCopiesVersion is the first version whose ordered filter keys
// carry their item's record (but for a transaction past
// maxIndexCopyBytes: orderedValue).
const orderedCopiesVersion = 7

// orderedValue is the value of an item's ordered filter keys: its status
// code, its domain in lower case and, when rec is not nil, a copy of its
// record (rec). Without a copy it is the status code and the domain (as
// versions 5 and 6 wrote it; a domain never starts with 0x00); with one,
// the status code, 0x00, the domain's length (uvarint), the domain and
// the record.
func orderedValue(status string, domain string, rec []byte) []byte {
	return appendOrderedValue(nil, status, domain, rec)
}

// appendOrderedValue appends orderedValue(status, domain, rec) to v.
func appendOrderedValue(v []byte, status string, domain string, rec []byte) []byte {
	domain = strings.ToLower(domain)
	if rec == nil {
		return append(append(v, statusCode[status]...), domain...)
	}
	v = slices.Grow(v, 2+binary.MaxVarintLen64+len(domain)+len(rec))
	v = append(append(v, statusCode[status]...), 0)
	v = binary.AppendUvarint(v, uint64(len(domain)))
	return append(append(v, domain...), rec...)
}

// parseOrderedValue splits an ordered filter key's value (orderedValue):
// its status code, domain and record's copy (nil for none); status 0 when
// the value does not tell (the item is read and matched).
func parseOrderedValue(v []byte) (status byte, domain, rec []byte) {
	if len(v) == 0 {
		return 0, nil, nil
	}
	if len(v) == 1 || v[1] != 0 {
		return v[0], v[1:], nil
	}
	n, w := binary.Uvarint(v[2:])
	if w <= 0 || uint64(len(v)-2-w) < n {
		return 0, nil, nil
	}
	start := 2 + w
	return v[0], v[start : start+int(n)], v[start+int(n):]
}

// orderedKeysVersion is the first version with the ordered filter keys as
// they are; every key that searches read but those is complete from
// version 4.
const orderedKeysVersion = 6

// searchReady reports whether the member's search keys are complete but
// perhaps the ordered filter keys (see orderedKeysVersion): a store of
// version 4 or 5 searches with its counts and trigrams while the indexer
// writes those.
func searchReady(tx *storage.Tx, memberID string) (bool, error) {
	v, err := searchVersion(tx, memberID)
	return v >= 4 && v <= searchIndexVersion, err
}

// searchVersion is the version of the member's complete search keys, 0
// for none.
func searchVersion(tx *storage.Tx, memberID string) (byte, error) {
	v, err := tx.Get(textReadyKey(memberID))
	if errors.Is(err, storage.ErrNotFound) || (err == nil && len(v) != 1) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// Filter counts (fc/): how many of the member's items each filter key
// selects, so that a search combining filters starts from the smallest and
// knows what the others would cost without reading them:
//
//	fc/l/<label id>     items with the label (li/)
//	fc/t/<A|N>          articles, newsletters (ty/)
//	fc/h                items with highlights (hh/)
//	fc/s/<status code>  items per status (the ix/ indexes)
//	fc/d/<domain>       items per source domain (sd/)
//	fc/r…               the reading counts (counts.go)
//
// Each is a count of 8 bytes (big-endian), absent for none. The item's
// transaction counts its changes (countItemFilters) and adds them at the
// commit (flushFilterCounts): the counts are exact, like the keys. Two
// writers of one member's counts conflict and one retries (Update), as
// they already do on tq.
func filterCountKey(memberID, kind, value string) []byte {
	return storage.Key("u", memberID, "gql", "fc", kind, value)
}

func typeCode(typ string) string {
	if typ == TypeNewsletter {
		return "N"
	}
	return "A"
}

// SearchIndexSize sums the bytes (keys and values, before Badger's
// compression) of a member's search keys: the folded texts of older
// stores (tt), the trigram index (textindex.KeyNames) and the filter
// keys and counts (sd, sn, ty, hh, fc, oy, oh, ot, ol).
func (s Store) SearchIndexSize(ctx context.Context, memberID string) (texts, trigrams, filters int64, err error) {
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		texts, trigrams, filters = 0, 0, 0
		type part struct {
			name string
			n    *int64
		}
		parts := []part{{"tt", &texts}}
		for _, name := range textindex.KeyNames {
			parts = append(parts, part{name, &trigrams})
		}
		for _, name := range []string{"sd", "sn", "ty", "hh", "fc", "oy", "oh", "ot", "ol"} {
			parts = append(parts, part{name, &filters})
		}
		for _, p := range parts {
			prefix := storage.Key("u", memberID, "gql", p.name)
			if err := tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
				if len(k) == len(prefix) || k[len(prefix)] == '/' { // not another name with this prefix
					*p.n += int64(len(k) + len(v))
				}
				return true, nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return texts, trigrams, filters, err
}

// filterCount is the number of the member's items a filter key selects.
func filterCount(tx *storage.Tx, memberID, kind, value string) (int, error) {
	n, err := countAt(tx, filterCountKey(memberID, kind, value))
	return int(n), err
}

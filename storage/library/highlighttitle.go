package library

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sort"
	"strconv"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Highlights in the order of their item's title (HighlightsPage sorted by
// title), then of their id: each one's place is its item's title sort
// value (itemSortValue: the title index's suffix, ix/) and its own id, the
// suffix of its cursors. The page walks the title keys of the items with
// highlights (ot/, highlightedTitlePrefix), which the item writer keeps
// with each change of an item's title, status or highlight count: it
// meets only items that have highlights, so it costs its highlights and
// their items, however many items have none. A store written before those
// keys (highlightTitleKeysVersion) walks the items' title indexes instead
// until the indexer's catch-up has written them (byStatusIndexes).

// byTitle adds the highlights the filter keeps after the place after, in
// the order of their item's title (desc: descending), until first+1 are
// added, or the walk passes over more than hiddenLimit items a pending
// emptying of the trash hides (short then holds where it stopped, as in
// the other orders). byStatus walks the status indexes whatever the
// member's keys.
func (hf *highlightFilter) byTitle(desc bool, after []byte, first, hiddenLimit int, short *cutShort, add func(*Highlight, []byte), byStatus bool) error {
	lower, upper, err := titleBounds(after, desc)
	if err != nil {
		return err
	}
	if !byStatus {
		v, err := searchVersion(hf.tx, hf.memberID)
		if err != nil {
			return err
		}
		if v >= highlightTitleKeysVersion && v <= searchIndexVersion {
			return hf.byTitleKeys(desc, after, lower, upper, first, hiddenLimit, short, add)
		}
	}
	return hf.byStatusIndexes(desc, after, lower, upper, first, add)
}

// titleBounds are the bounds on the items' title suffixes of a walk after
// the place after: its item included, whose highlights past after follow.
func titleBounds(after []byte, desc bool) (lower, upper []byte, err error) {
	if after == nil {
		return nil, nil, nil
	}
	if len(after) < 16 {
		return nil, nil, ErrBadCursor
	}
	itemSuf := after[:len(after)-8]
	if desc {
		// Inclusive of the item: no other suffix has it as a prefix.
		return nil, append(slices.Clone(itemSuf), 0), nil
	}
	return itemSuf, nil, nil
}

// byTitleKeys is byTitle along the title keys. An item a pending emptying
// hides is passed over whole, its highlights unread, and counts once
// toward hiddenLimit; its key's copy of the item's record (orderedValue)
// spares reading the item.
func (hf *highlightFilter) byTitleKeys(desc bool, after, lower, upper []byte, first, hiddenLimit int, short *cutShort, add func(*Highlight, []byte)) error {
	needItem := hf.cut.pending || hf.text != "" || hf.f.SavedFrom != nil || hf.f.SavedTo != nil
	n := 0
	ks := keyset{prefix: highlightedTitlePrefix(hf.memberID), desc: desc, lower: lower, upper: upper, values: true}
	return ks.scan(hf.tx, func(suf, v []byte) (bool, error) {
		if len(suf) < 8 {
			return true, nil
		}
		id := strconv.FormatUint(binary.BigEndian.Uint64(suf[len(suf)-8:]), 10)
		if needItem {
			_, _, rec := parseOrderedValue(v)
			it, err := hf.itemFrom(id, rec)
			if errors.Is(err, storage.ErrNotFound) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			if hf.cut.hides(it) {
				if after != nil && bytes.Equal(suf, after[:len(after)-8]) {
					return true, nil // where the last page ended short: passed already
				}
				return !short.pass(pastItem(suf, desc), hiddenLimit), nil
			}
		}
		return hf.eachPlaced(suf, id, desc, after, func(h *Highlight, place []byte) (bool, error) {
			ok, err := hf.keep(h)
			if err != nil || !ok {
				return err == nil, err
			}
			add(h, place)
			n++
			return n <= first, nil
		})
	})
}

// pastItem is the place past every highlight of the item whose title
// suffix is suf, in the walk's order: where a walk that passed over the
// item stops, and the next page starts after (its bounds, titleBounds,
// take the item in, and eachPlaced passes over each of its places).
func pastItem(suf []byte, desc bool) []byte {
	var end uint64 = 1<<64 - 1
	if desc {
		end = 0
	}
	return encUint64(slices.Clone(suf), end)
}

// itemFrom is the item id as the filter's current item (itemOf), parsed
// from rec, a copy of its record, when not nil.
func (hf *highlightFilter) itemFrom(id string, rec []byte) (*SavedItem, error) {
	if rec == nil {
		return hf.itemOf(id)
	}
	hf.cur, hf.curContent = SavedItem{}, nil
	if err := parseItemRecord(rec, &hf.cur); err != nil {
		return nil, err
	}
	return &hf.cur, nil
}

// eachPlaced calls fn with each highlight of the item id, whose title
// suffix is suf, and its place, in the walk's order, from past after,
// while fn answers true; it returns fn's last answer (true for none).
func (hf *highlightFilter) eachPlaced(suf []byte, id string, desc bool, after []byte, fn func(h *Highlight, place []byte) (bool, error)) (bool, error) {
	ids, err := hf.tx.Suffixes(itemHighlightKey(hf.memberID, id, ""))
	if err != nil {
		return false, err
	}
	nums := make([]uint64, 0, len(ids))
	for _, id := range ids {
		nums = append(nums, idBytes(id))
	}
	sort.Slice(nums, func(a, b int) bool { return nums[a] < nums[b] != desc })
	for _, num := range nums {
		place := encUint64(slices.Clone(suf), num)
		if after != nil {
			c := bytes.Compare(place, after)
			if !desc && c <= 0 || desc && c >= 0 {
				continue
			}
		}
		var h Highlight
		if err := hf.tx.GetJSON(highlightKey(hf.memberID, strconv.FormatUint(num, 10)), &h); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			return false, err
		}
		if more, err := fn(&h, place); err != nil || !more {
			return false, err
		}
	}
	return true, nil
}

// byStatusIndexes is byTitle along the items' title index of each status
// (every item read, with highlights or not), the statuses' first+1
// highlights merged: the walk of a store whose title keys are not written
// yet. It passes over the items a pending emptying hides without bound.
func (hf *highlightFilter) byStatusIndexes(desc bool, after, lower, upper []byte, first int, add func(*Highlight, []byte)) error {
	type hit struct {
		h   *Highlight
		suf []byte
	}
	var hits []hit
	tx, memberID := hf.tx, hf.memberID
	for _, status := range []string{StatusActive, StatusArchived, StatusDeleted} {
		n := 0
		prefix := itemIndexPrefix(memberID, status, SortTitle)
		err := keyset{prefix: prefix, desc: desc, lower: lower, upper: upper, values: true}.scan(tx, func(suf, rec []byte) (bool, error) {
			var it SavedItem
			if len(rec) > 0 {
				if err := parseItemRecord(rec, &it); err != nil {
					return false, err
				}
			} else {
				id := strconv.FormatUint(binary.BigEndian.Uint64(suf[len(suf)-8:]), 10)
				if err := getItem(tx, itemKey(memberID, id), &it); err != nil {
					if errors.Is(err, storage.ErrNotFound) {
						return true, nil
					}
					return false, err
				}
			}
			if it.HighlightCount == 0 {
				return true, nil
			}
			return hf.eachPlaced(suf, it.ID, desc, after, func(h *Highlight, place []byte) (bool, error) {
				ok, err := hf.keep(h)
				if err != nil || !ok {
					return err == nil, err
				}
				hits = append(hits, hit{h, place})
				n++
				return n <= first, nil
			})
		})
		if err != nil {
			return err
		}
	}
	sort.SliceStable(hits, func(a, b int) bool {
		c := bytes.Compare(hits[a].suf, hits[b].suf)
		return c < 0 != desc
	})
	for _, x := range hits {
		add(x.h, x.suf)
	}
	return nil
}

package library

import (
	"context"
	"errors"
	"math"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Removing an item with many highlights. removeItem deletes an item's
// highlights with it, four keys each, in the item's transaction; an item
// with thousands (an import of a book's Kindle highlights) would outgrow
// Badger's transaction even alone, and could never be removed. So before
// such an item is removed, while it is in the trash, its highlights are
// deleted in transactions of their own (dropHighlights) until few enough
// are left for removeItem: PermanentlyDeleteItems does so before it
// removes, and the library's worker when an emptying of the trash finds
// an item it cannot remove (finishEmptying). Each of those transactions
// lowers the item's highlight count with the highlights it deletes, so
// the item and its highlights agree for a reader at every commit; cut
// short, the next attempt (the client's, the worker's next pass) goes on
// from what is left. An item restored from the trash meanwhile keeps the
// highlights not deleted yet.

// highlightsPerTx is how many highlights one transaction deletes: at most
// what removeItem leaves to its item's transaction, and what each of
// dropHighlights' transactions deletes.
const highlightsPerTx = 250

// itemHighlightIDs reads the ids of up to limit of the item's highlights,
// its links' (a link without its highlight included).
func itemHighlightIDs(tx *storage.Tx, memberID, itemID string, limit int) ([]string, error) {
	prefix := itemHighlightKey(memberID, itemID, "")
	var ids []string
	err := tx.Scan(prefix, nil, false, true, func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(prefix):]))
		return len(ids) < limit, nil
	})
	return ids, err
}

// tooManyToRemove reports whether removeItem of it would delete more than
// highlightsPerTx highlights.
func tooManyToRemove(tx *storage.Tx, it *SavedItem) (bool, error) {
	ids, err := itemHighlightIDs(tx, it.MemberID, it.ID, highlightsPerTx+1)
	return len(ids) > highlightsPerTx, err
}

// dropHighlights deletes highlights of the member's item id while it is in
// the trash with a mark of at most gen, highlightsPerTx a transaction,
// until at most highlightsPerTx are left, and returns how many it
// deleted. It stops when the item is gone, restored or (stopping reports
// true) the worker stops.
func (s Store) dropHighlights(ctx context.Context, memberID, id string, gen uint64, stopping func() bool) (int, error) {
	dropped := 0
	for stopping == nil || !stopping() {
		n, links := 0, 0
		err := s.st.Update(ctx, func(tx *storage.Tx) error {
			n, links = 0, 0
			bytes := 0
			var it SavedItem
			if err := getItem(tx, itemKey(memberID, id), &it); errors.Is(err, storage.ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
			if it.Status != StatusDeleted || it.TrashGen > gen {
				return nil // restored, or not this emptying's
			}
			ids, err := itemHighlightIDs(tx, memberID, id, highlightsPerTx+1)
			if err != nil || len(ids) <= highlightsPerTx {
				return err
			}
			links = highlightsPerTx
			for _, hid := range ids[:links] {
				h := Highlight{ID: hid, SavedItemID: id}
				if err := tx.GetJSON(highlightKey(memberID, hid), &h); err != nil && !errors.Is(err, storage.ErrNotFound) {
					return err
				} else if err == nil {
					n++
					bytes += highlightBytes(h.Segments, h.Note)
				}
				// A link without its highlight goes too.
				if err := deleteHighlight(tx, memberID, &h); err != nil {
					return err
				}
			}
			return touchItems(tx, memberID, []string{id}, highlightsChanged(nil, -n, -bytes))
		})
		if err != nil {
			return dropped, err
		}
		dropped += n
		if links == 0 {
			return dropped, nil
		}
	}
	return dropped, nil
}

// dropManyHighlights is dropHighlights for each item of ids in the trash
// with more highlights than removeItem deletes (any mark).
func (s Store) dropManyHighlights(ctx context.Context, memberID string, ids []string) error {
	var many []string
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		return eachItem(tx, memberID, ids, func(it *SavedItem) error {
			if it.Status != StatusDeleted {
				return nil
			}
			too, err := tooManyToRemove(tx, it)
			if too {
				many = append(many, it.ID)
			}
			return err
		})
	})
	for _, id := range many {
		if err != nil {
			break
		}
		_, err = s.dropHighlights(ctx, memberID, id, math.MaxUint64, nil)
	}
	return err
}

// finishEmptying is finishEmptyingTrash for the library's worker: when the
// emptying stops at an item too big to remove in a transaction, the
// highlights of the next items it is to delete are dropped first
// (dropEmptyingHighlights), and the emptying goes on.
func (s Store) finishEmptying(memberID string, ss *storeState) error {
	for {
		err := s.finishEmptyingTrash(memberID, ss)
		if !errors.Is(err, kv.ErrTooBig) {
			return err
		}
		n, derr := s.dropEmptyingHighlights(memberID, ss)
		if derr != nil || n == 0 {
			return errors.Join(err, derr)
		}
	}
}

// dropEmptyingHighlights drops the highlights of the items of the next
// batch of the member's emptying of the trash that have too many to be
// removed with them, and returns how many it dropped.
func (s Store) dropEmptyingHighlights(memberID string, ss *storeState) (int, error) {
	ctx := s.st.Background()
	var j trashJob
	var many []string
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		if err := tx.GetJSON(emptyingKey(memberID), &j); errors.Is(err, storage.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		ids, _, err := trashAfter(tx, memberID, j.After, emptyTrashBatch)
		if err != nil {
			return err
		}
		return eachItem(tx, memberID, ids, func(it *SavedItem) error {
			if it.Status != StatusDeleted || it.TrashGen > j.Gen {
				return nil
			}
			too, err := tooManyToRemove(tx, it)
			if too {
				many = append(many, it.ID)
			}
			return err
		})
	})
	dropped := 0
	for _, id := range many {
		if err != nil {
			break
		}
		var n int
		n, err = s.dropHighlights(ctx, memberID, id, j.Gen, ss.Stopping)
		dropped += n
	}
	return dropped, err
}

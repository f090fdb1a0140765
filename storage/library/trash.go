package library

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Emptying the trash deletes the items that were in it when the member
// asked, and no other: an item moved there meanwhile (by the member on
// another device, an Omnivore client, a save into the trash) stays, and
// one restored meanwhile is not deleted. A trash may hold more items than
// a request should delete, so the deletion is a job of the store that
// goes on in the background and after a restart.
//
// The cut is the member's count of emptyings (emptiedKey), not a time: the
// nodes' clocks differ, and an item's dates are the writer's clock. Each
// move into the trash reads the count in the item's transaction and marks
// the item with the emptying to come (SavedItem.TrashGen, set by writeItem:
// markTrashed); an emptying raises the count in the transaction that
// records its job. Both engines refuse a transaction that read a key
// another wrote since it began (storage-engines.md), so a move into the
// trash that commits after the emptying's cut read the raised count and
// carries a later mark, and one that committed before carries the mark the
// job deletes.
//
//	u/<member>/gql/emptied   uvarint: the emptyings of the trash begun
//	u/<member>/gql/emptying  trashJob (JSON): the emptying under way

func emptiedKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "emptied") }

func emptyingKey(memberID string) []byte { return storage.Key("u", memberID, "gql", "emptying") }

// trashJob is an emptying of a member's trash under way: it deletes the
// items in the trash whose mark is at most Gen, walking the trash in the
// order of creation, from the index key after After (none yet: the
// start). A later emptying replaces it with its own, from the start.
// Left is how many of the items it is to delete are still in the trash:
// each leaves it through writeItem or removeItem (leaveEmptying), so the
// trash's count a client sees leaves them out (a job of a version before
// it has none: 0).
type trashJob struct {
	Gen   uint64 `json:"gen"`
	After []byte `json:"after,omitempty"`
	Left  int    `json:"left,omitempty"`
}

// emptyingCut is what a member's pending emptying hides from clients, as
// read in one transaction: the items of the trash marked at or before it
// (an item trashed before marks were kept, mark 0, with any), which the
// member was told are deleted.
type emptyingCut struct {
	pending bool
	gen     uint64
	left    int
}

// readEmptyingCut reads the member's pending emptying (none: the zero cut,
// which hides nothing).
func readEmptyingCut(tx *storage.Tx, memberID string) (emptyingCut, error) {
	var j trashJob
	if err := tx.GetJSON(emptyingKey(memberID), &j); errors.Is(err, storage.ErrNotFound) {
		return emptyingCut{}, nil
	} else if err != nil {
		return emptyingCut{}, err
	}
	return emptyingCut{pending: true, gen: j.Gen, left: j.Left}, nil
}

// hides reports whether it is one of the items the cut's emptying is to
// delete: listed, counted, read and changed by no client.
func (c emptyingCut) hides(it *SavedItem) bool {
	return c.pending && it.Status == StatusDeleted && it.TrashGen <= c.gen
}

// hiddenByEmptying reports whether it is an item a pending emptying of its
// member's trash is to delete (emptyingCut.hides); it reads the member's
// emptying only for an item of the trash.
func hiddenByEmptying(tx *storage.Tx, it *SavedItem) (bool, error) {
	if it.Status != StatusDeleted {
		return false, nil
	}
	c, err := readEmptyingCut(tx, it.MemberID)
	return c.hides(it), err
}

// getClientItem is getItem for what a client reads or changes by id:
// storage.ErrNotFound for an item a pending emptying is to delete.
func getClientItem(tx *storage.Tx, memberID, id string, it *SavedItem) error {
	if err := getItem(tx, itemKey(memberID, id), it); err != nil {
		return err
	}
	if hidden, err := hiddenByEmptying(tx, it); err != nil || hidden {
		return cmp.Or(err, storage.ErrNotFound)
	}
	return nil
}

// getClientHighlight reads the member's highlight id for what a client
// reads or changes by id: storage.ErrNotFound for a highlight of an item
// a pending emptying is to delete (getClientItem), as for its item.
func getClientHighlight(tx *storage.Tx, memberID, id string, h *Highlight) error {
	if err := tx.GetJSON(highlightKey(memberID, id), h); err != nil {
		return err
	}
	var it SavedItem
	return getClientItem(tx, memberID, h.SavedItemID, &it)
}

// leaveEmptying counts, in the member's pending emptying, an item it was to
// delete that leaves the trash (it nil: removed) or takes a new mark there
// (saved again): writeItem and removeItem call it with every write.
func leaveEmptying(tx *storage.Tx, old, it *SavedItem) error {
	if old == nil || old.Status != StatusDeleted || (it != nil && it.Status == StatusDeleted && it.TrashGen == old.TrashGen) {
		return nil
	}
	var j trashJob
	if err := tx.GetJSON(emptyingKey(old.MemberID), &j); errors.Is(err, storage.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if old.TrashGen > j.Gen || j.Left == 0 {
		return nil
	}
	j.Left--
	return tx.PutJSON(emptyingKey(old.MemberID), j, 0)
}

// emptyTrashBatch is the items one transaction deletes (removeItem writes
// a few dozen keys each, and a tombstone; fewer when Badger finds the
// transaction too big).
const emptyTrashBatch = 200

// emptyTrashInRequest is how many items EmptyTrash deletes before it
// answers: a trash that small is empty when the member is told so; a larger
// one goes on in the background, so that a request costs at most this
// many deletions whatever the trash holds.
const emptyTrashInRequest = 1000

// emptiedCount is the member's count of emptyings of the trash.
func emptiedCount(tx *storage.Tx, memberID string) (uint64, error) {
	v, err := tx.Get(emptiedKey(memberID))
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	g, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, fmt.Errorf("library: malformed count of emptyings of %s's trash", memberID)
	}
	return g, nil
}

// trashMark is the mark of an item moved into the member's trash now: the
// emptying to come (the count of those begun, plus one; 0 is an item
// moved there before marks were kept, which every emptying takes).
func trashMark(tx *storage.Tx, memberID string) (uint64, error) {
	g, err := emptiedCount(tx, memberID)
	return g + 1, err
}

// markTrashed sets its mark of the emptying of the trash that deletes it
// (writeItem calls it for every write of an item): an item moving into the trash, or saved again there (a new
// createdAt, which moves it in the order an emptying walks), takes the
// emptying to come, so that one begun before does not delete it; an item
// staying in the trash keeps its mark, and one elsewhere has none. An
// item a pending emptying was to delete that leaves that emptying is
// counted out of it (leaveEmptying).
func markTrashed(tx *storage.Tx, old, it *SavedItem) error {
	switch {
	case it.Status != StatusDeleted:
		it.TrashGen = 0
	case old != nil && old.Status == StatusDeleted && old.CreatedAt.Equal(it.CreatedAt):
		it.TrashGen = old.TrashGen
	default:
		g, err := trashMark(tx, it.MemberID)
		if err != nil {
			return err
		}
		it.TrashGen = g
	}
	return leaveEmptying(tx, old, it)
}

// EmptyTrash permanently deletes the items in the member's trash at the
// time of the call and returns how many there were (those a pending
// emptying was already to delete not counted again). Up to
// emptyTrashInRequest of them are deleted before it returns; a larger
// trash is emptied on in the background by the node that holds the
// emptyings' lease (emptier), which deletes each item that is still in
// the trash when its turn comes. Once it returns, the deletion is
// recorded and its items are hidden from clients (emptyingCut): an error
// after that point is left to the background, not answered.
func (s Store) EmptyTrash(ctx context.Context, memberID string) (int, error) {
	n := 0
	err := s.st.Update(ctx, func(tx *storage.Tx) error {
		g, err := emptiedCount(tx, memberID)
		if err != nil {
			return err
		}
		all, err := trashCount(tx, memberID)
		if err != nil {
			return err
		}
		prev, err := readEmptyingCut(tx, memberID)
		if err != nil {
			return err
		}
		n = max(all-prev.left, 0)
		if err := tx.Put(emptiedKey(memberID), binary.AppendUvarint(nil, g+1), 0); err != nil {
			return err
		}
		// (A word search's page cached before the cut is dropped by the
		// first batch's commit, which removes items: removeItem.)
		return tx.PutJSON(emptyingKey(memberID), trashJob{Gen: g + 1, Left: all}, 0)
	})
	if err != nil {
		return 0, err
	}
	done := false
	runs := &s.state().emptying
	if runs.claim(memberID) {
		done, err = s.emptyTrash(ctx, memberID, emptyTrashInRequest/emptyTrashBatch, nil)
		runs.release(memberID)
	}
	if !done || err != nil {
		// The node that holds the lease goes on (this one, or another:
		// told once this request's batches are over, so that two nodes
		// do not run the same batches).
		if err := s.st.Publish(s.st.Background(), emptyingChannel, memberID); err != nil {
			s.st.Logger().Warn("the emptying of the trash goes on at the next look for emptyings", zap.Error(err))
		}
	}
	return n, nil
}

// emptyingRuns are the members whose emptying of the trash a request or
// the worker of this process is carrying on: the other leaves it alone
// rather than run the same batches, whose transactions would conflict and
// run again. (Another node's background runs only while it holds the
// emptyings' lease, and this node's request tells it when its batches are
// over; should their runs meet, they conflict the same way, which is
// harmless: each batch reads the job.)
type emptyingRuns struct {
	mu      sync.Mutex
	members map[string]bool
}

// claim reports whether the member's emptying was free, and takes it.
func (r *emptyingRuns) claim(memberID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.members[memberID] {
		return false
	}
	if r.members == nil {
		r.members = map[string]bool{}
	}
	r.members[memberID] = true
	return true
}

func (r *emptyingRuns) release(memberID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.members, memberID)
}

// trashCount is how many items the member's trash holds: the status count
// the search keeps, or, in a store whose counts are not built yet, the
// trash's index keys counted.
func trashCount(tx *storage.Tx, memberID string) (int, error) {
	if ready, err := searchReady(tx, memberID); err != nil {
		return 0, err
	} else if ready {
		return filterCount(tx, memberID, "s", statusCode[StatusDeleted])
	}
	n := 0
	err := tx.Scan(itemIndexPrefix(memberID, StatusDeleted, SortCreatedAt), nil, false, true, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// emptyTrash carries the member's emptying of the trash on, a batch a
// transaction, for at most batches transactions (0: until it ends) or
// until stopping reports true; done is true when no emptying is left.
//
// A batch deletes the items of the next index keys of the trash in the
// order of creation whose mark is the job's or earlier, and records the
// last key in the job (the job's end with the last batch), in one
// transaction: cut short anywhere, the job goes on after the last batch
// committed, and an item is deleted exactly when its batch commits. An
// item keeps its place in that order while it stays in the trash with its
// mark (markTrashed gives a new one to an item saved again, which moves
// it), so one walk meets every item the job is to delete.
func (s Store) emptyTrash(ctx context.Context, memberID string, batches int, stopping func() bool) (done bool, err error) {
	limit := emptyTrashBatch
	for i := 0; batches == 0 || i < batches; i++ {
		if stopping != nil && stopping() {
			return false, nil
		}
		err := s.st.Update(ctx, func(tx *storage.Tx) error {
			done = false
			var j trashJob
			if err := tx.GetJSON(emptyingKey(memberID), &j); errors.Is(err, storage.ErrNotFound) {
				done = true
				return nil
			} else if err != nil {
				return err
			}
			ids, last, err := trashAfter(tx, memberID, j.After, limit)
			if err != nil {
				return err
			}
			err = eachItem(tx, memberID, ids, func(it *SavedItem) error {
				if it.Status != StatusDeleted || it.TrashGen > j.Gen {
					return nil // restored, or moved there after the cut
				}
				return removeItem(tx, it)
			})
			if err != nil {
				return err
			}
			if len(ids) < limit {
				done = true
				return tx.Delete(emptyingKey(memberID))
			}
			// Read again: removeItem counted the items out of it (Left).
			if err := tx.GetJSON(emptyingKey(memberID), &j); err != nil {
				return err
			}
			j.After = last
			return tx.PutJSON(emptyingKey(memberID), j, 0)
		})
		if errors.Is(err, kv.ErrTooBig) && limit > 1 {
			// Items with many highlights or images: fewer a batch.
			limit /= 2
			i--
			continue
		}
		if err != nil || done {
			return done, err
		}
	}
	return false, nil
}

// emptyTrashInPass is how many items the background worker deletes for
// one member before it turns to the other members' work (a pass of
// newStoreState's indexer): it comes back to the rest at its next pass.
const emptyTrashInPass = 5000

// trashAfter reads the ids of the next limit items of the member's trash
// in the order of creation, after the index key after (nil: from the
// first), and the last index key read.
func trashAfter(tx *storage.Tx, memberID string, after []byte, limit int) (ids []string, last []byte, err error) {
	var start []byte
	if after != nil {
		start = append(append(start, after...), 0) // the next key
	}
	err = tx.Scan(itemIndexPrefix(memberID, StatusDeleted, SortCreatedAt), start, false, true, func(k, _ []byte) (bool, error) {
		ids = append(ids, strconv.FormatUint(binary.BigEndian.Uint64(k[len(k)-8:]), 10))
		last = append(last[:0], k...)
		return len(ids) < limit, nil
	})
	return ids, last, err
}

// finishEmptyingTrash carries on the member's emptying of the trash, if
// one is under way and this node holds the emptyings' lease (emptier),
// for emptyTrashInPass items or until the worker of ss (s's state, handed
// over by the indexer ss makes: newStoreState) is stopping or the lease
// is lost.
func (s Store) finishEmptyingTrash(memberID string, ss *storeState) error {
	lease := &emptierKind.Of(s.st).leading
	if !lease.Load() {
		return nil // the holder's (it looks for every pending emptying when it takes the lease)
	}
	stopping := func() bool { return ss.Stopping() || !lease.Load() }
	// Most passes find none: a read, not a read-write transaction.
	var under bool
	if err := s.st.View(s.st.Background(), func(tx *storage.Tx) error {
		var err error
		under, err = tx.Has(emptyingKey(memberID))
		return err
	}); err != nil || !under {
		return err
	}
	if !ss.emptying.claim(memberID) {
		return nil // a request runs it, and tells the worker if it stops short
	}
	done, err := s.emptyTrash(s.st.Background(), memberID, emptyTrashInPass/emptyTrashBatch, stopping)
	ss.emptying.release(memberID)
	if err != nil {
		return fmt.Errorf("empty the trash: %w", err)
	}
	if !done && !stopping() {
		ss.Notify(memberID)
	}
	return nil
}

package library

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/hearthkit/caddy-hearth/storage"
)

// libraryTx is the library's state of a read-write transaction, made the
// first time the transaction writes what needs it (libraryState): a
// transaction of another domain holds none.
type libraryTx struct {
	// indexCopyBytes and orderedCopyBytes count the item copies
	// writeItem wrote to the status indexes and to the ordered filter keys.
	indexCopyBytes, orderedCopyBytes int
	// highlightCopyBytes counts the highlights syncHighlightCopies wrote,
	// and highlightsLeft lists the items (member id, item id) whose
	// highlights it left for after the commit (finishHighlightCopies).
	highlightCopyBytes int
	highlightsLeft     [][2]string
	// textMembers lists the members whose items' text this transaction
	// changed (setItemText), for the search indexer; its first is kept in
	// textMember, so the common case (one member) allocates nothing more.
	textMembers []string
	textMember  [1]string
	// backlogMembers lists the members whose text queue this transaction
	// took past a multiple of textBacklogCheckEvery: their writer reads
	// the backlog after the commit (waitForTextBacklog).
	backlogMembers []string
	// filterDeltas holds the changes to the search filter counts, written
	// at the commit (flushFilterCounts).
	filterDeltas map[filterCountRef]int64
	// siteName and siteNames hold the site names (member id, domain)
	// written (sn/): the first in siteName, the others in siteNames.
	siteName  [2]string
	siteNames map[[2]string]bool
	// fenceMoves holds the items' moves in the createdAt order, added to
	// the offsets' buckets at the commit (flushFences, offsets.go); its
	// first two in fenceMove, so an item's write allocates nothing more.
	fenceMoves []fenceMove
	fenceMove  [2]fenceMove
	// itemMembers lists the members whose items this transaction wrote
	// or removed, whose items version it sets (flushItemsVersions).
	itemMembers []string
	// readyMember is a member whose search keys this transaction found
	// (or marked) complete at searchIndexVersion: firstItemReady does not
	// read them again for each item of an import's batch.
	readyMember string
	// readingMember is the member whose reading counts readingCounted
	// found kept for every item (readingAll) or for the items up to the
	// catch-up's cursor (readingCursor; none for nil).
	readingMember string
	readingAll    bool
	readingCursor []byte
	// scratch holds writeItem's buffers for the transaction's next item.
	scratch *itemScratch
}

// filterCountRef names a filter count (filterCountKey's parts), a key of
// libraryTx.filterDeltas that costs an item's write no allocation.
type filterCountRef struct{ memberID, kind, value string }

var libraryState = storage.NewTxState[libraryTx]()

func init() { storage.OnCommit(libraryBeforeCommit, libraryAfterCommit) }

// libraryBeforeCommit writes the filter counts' changes inside the
// transaction.
func libraryBeforeCommit(tx *storage.Tx) error {
	lt := libraryState.Peek(tx)
	if lt == nil {
		return nil
	}
	if err := flushFilterCounts(tx, lt); err != nil {
		return err
	}
	if err := flushItemsVersions(tx, lt); err != nil {
		return err
	}
	return flushFences(tx, lt)
}

// libraryAfterCommit tells the search indexer which members' texts
// changed (and holds a writer that may have left too many waiting:
// maxTextBacklog), then brings the highlights left out in step.
func libraryAfterCommit(ctx context.Context, st *storage.Store, tx *storage.Tx) error {
	lt := libraryState.Peek(tx)
	if lt == nil {
		return nil
	}
	s := Of(st)
	for _, m := range lt.textMembers {
		s.textIndex().Notify(m)
	}
	for _, m := range lt.backlogMembers {
		s.waitForTextBacklog(ctx, m)
	}
	if len(lt.highlightsLeft) > 0 {
		return s.finishHighlightCopies(ctx, lt.highlightsLeft)
	}
	return nil
}

// addTextMember notes that memberID's items' text changed.
func (lt *libraryTx) addTextMember(memberID string) {
	if lt.textMembers == nil {
		lt.textMembers = lt.textMember[:0]
	}
	if !contains(lt.textMembers, memberID) {
		lt.textMembers = append(lt.textMembers, memberID)
	}
}

// itemScratch holds writeItem's buffers between the items of a
// transaction (an import's batch writes hundreds): the record, the index
// and ordered keys and the ordered keys' value are built in them again for
// each item, since the store copies what it is given (storage.Tx.Put).
type itemScratch struct {
	rec, keyBuf, value []byte
	keys               [][]byte
	json               bytes.Buffer
}

// contentJSON is json.Marshal(c), the content's record, in sc's buffer.
func (sc *itemScratch) contentJSON(c *ItemContent) ([]byte, error) {
	sc.json.Reset()
	if err := json.NewEncoder(&sc.json).Encode(c); err != nil {
		return nil, err
	}
	b := sc.json.Bytes()
	return b[:len(b)-1], nil // without the newline Encode ends with
}

// takeScratch takes the transaction's item buffers (a write within a write
// would find none and allocate its own); putScratch gives them back.
func takeScratch(lt *libraryTx) *itemScratch {
	sc := lt.scratch
	lt.scratch = nil
	if sc == nil {
		sc = &itemScratch{}
	}
	return sc
}

func putScratch(lt *libraryTx, sc *itemScratch) { lt.scratch = sc }

package textindex

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Queue queues document id, whose text the transaction changes, for the
// indexer, which reads the text the document then has, and returns its
// place in the queue (0, 1, 2, … for an index's successive entries). The
// caller tells its indexer after the commit.
func (x Index) Queue(tx *storage.Tx, id string) (uint64, error) {
	qt := queueState.Of(tx)
	if qt.written {
		// Its place would be given again by the next transaction.
		return 0, errors.New("textindex: a document queued after the transaction's queue ends were written")
	}
	k := x.queueKey()
	seq, ok := qt.get(k)
	if !ok {
		b, err := tx.Get(k)
		if err == nil && len(b) == 8 {
			seq = binary.BigEndian.Uint64(b)
		} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return 0, err
		}
	}
	if err := tx.Put(x.pendingKey(seq), []byte(id), 0); err != nil {
		return 0, err
	}
	qt.set(k, seq+1)
	return seq, nil
}

// queueTx is the text index's state of a read-write transaction: the next
// place of each queue the transaction queued documents in, written once
// before the commit (writeQueueEnds) instead of once a document (an
// import's batch queues hundreds). The first queue's is kept in key and
// next, so a save (one queue) allocates no map.
type queueTx struct {
	key     []byte
	next    uint64
	more    map[string]uint64
	written bool // by writeQueueEnds: no document may be queued after
}

func (qt *queueTx) get(k []byte) (uint64, bool) {
	if qt.key != nil && bytes.Equal(qt.key, k) {
		return qt.next, true
	}
	seq, ok := qt.more[string(k)]
	return seq, ok
}

func (qt *queueTx) set(k []byte, next uint64) {
	switch {
	case qt.key == nil || bytes.Equal(qt.key, k):
		qt.key, qt.next = k, next
	case qt.more == nil:
		qt.more = map[string]uint64{string(k): next}
	default:
		qt.more[string(k)] = next
	}
}

var queueState = storage.NewTxState[queueTx]()

// The hook runs before those of the packages that import this one (their
// init functions run after this one's), so the queue ends are written
// after every document the transaction's own function queued; no commit
// hook queues documents.
func init() { storage.OnCommit(writeQueueEnds, nil) }

func writeQueueEnds(tx *storage.Tx) error {
	qt := queueState.Peek(tx)
	if qt == nil || qt.key == nil {
		return nil
	}
	qt.written = true
	if err := tx.Put(qt.key, binary.BigEndian.AppendUint64(nil, qt.next), 0); err != nil {
		return err
	}
	for k, seq := range qt.more {
		if err := tx.Put([]byte(k), binary.BigEndian.AppendUint64(nil, seq), 0); err != nil {
			return err
		}
	}
	return nil
}

// queueEnd is the value of the queue's key (tq/) as tx sees it: as the
// transaction will write it when it queued documents, else as stored.
func (x Index) queueEnd(tx *storage.Tx) ([]byte, error) {
	k := x.queueKey()
	if qt := queueState.Peek(tx); qt != nil {
		if seq, ok := qt.get(k); ok {
			return binary.BigEndian.AppendUint64(nil, seq), nil
		}
	}
	return tx.Get(k)
}

// Remove takes document id out of the index, in the transaction that
// removes the document (a queued entry of it finds no document and is
// dropped).
func (x Index) Remove(tx *storage.Tx, id string) error {
	if doc, err := tx.Get(x.DocKey(id)); err == nil && len(doc) == 4 {
		if err := tx.Delete(x.docIDKey(binary.BigEndian.Uint32(doc))); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err := tx.DeleteIfPresent(x.WideKey(id)); err != nil { // see place
		return err
	}
	return tx.Delete(x.DocKey(id))
}

// place gives a document its new place in the index: its old document
// number is dropped; when it has a text, it gets doc (or, when wide, a tw/
// entry instead).
func (x Index) place(tx *storage.Tx, id string, hasText, wide bool, doc uint32) error {
	if old, err := tx.Get(x.DocKey(id)); err == nil && len(old) == 4 {
		if err := tx.Delete(x.docIDKey(binary.BigEndian.Uint32(old))); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	// tw/ is deleted only when present: a deletion marker per indexed
	// document would lie in the range every search scans (Candidates)
	// until the engine's compaction drops it.
	if err := tx.DeleteIfPresent(x.WideKey(id)); err != nil {
		return err
	}
	switch {
	case !hasText:
		return tx.Delete(x.DocKey(id))
	case wide:
		if err := tx.Delete(x.DocKey(id)); err != nil {
			return err
		}
		return tx.Put(x.WideKey(id), nil, 0)
	}
	var d [4]byte
	binary.BigEndian.PutUint32(d[:], doc)
	if err := tx.Put(x.DocKey(id), d[:], 0); err != nil {
		return err
	}
	return tx.Put(x.docIDKey(doc), []byte(id), 0)
}

// Waiting is how many entries the queue holds that the indexer has not
// taken yet (a document queued twice counts twice): two reads, whatever
// the queue's length.
func (x Index) Waiting(tx *storage.Tx) (uint64, error) {
	meta, err := x.ReadMeta(tx)
	if err != nil {
		return 0, err
	}
	b, err := x.queueEnd(tx)
	if errors.Is(err, storage.ErrNotFound) || err == nil && len(b) != 8 {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if seq := binary.BigEndian.Uint64(b); seq > meta.PendingFrom {
		return seq - meta.PendingFrom, nil
	}
	return 0, nil
}

// State returns what a search's candidates and the texts they are
// verified on depend on: the index's Meta and the queue's next sequence
// number, as stored (or as this transaction queued). Every change of a
// document's text queues it (a new sequence number) and every change of
// the segments or of the queue's low water mark writes Meta, so two reads
// that give the same State see the same candidates for any needle and the
// same text of every document but those removed since. A caller may keep what it read against it.
func (x Index) State(tx *storage.Tx) ([]byte, error) {
	meta, err := tx.Get(x.MetaKey())
	st, err := appendStatePart(nil, meta, err)
	if err != nil {
		return nil, err
	}
	end, err := x.queueEnd(tx)
	return appendStatePart(st, end, err)
}

// appendStatePart appends to st a value read for State, or its absence.
func appendStatePart(st, v []byte, err error) ([]byte, error) {
	if errors.Is(err, storage.ErrNotFound) {
		return append(st, 0), nil // absent: unlike any value, whose length is written plus one
	}
	if err != nil {
		return nil, err
	}
	st = binary.AppendUvarint(st, uint64(len(v))+1)
	return append(st, v...), nil
}

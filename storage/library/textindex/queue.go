package textindex

import (
	"encoding/binary"
	"errors"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Queue queues document id, whose text the transaction changes, for the
// indexer, which reads the text the document then has, and returns its
// place in the queue (0, 1, 2, … for an index's successive entries). The
// caller tells its indexer after the commit.
func (x Index) Queue(tx *storage.Tx, id string) (uint64, error) {
	var seq uint64
	if b, err := tx.Get(x.queueKey()); err == nil && len(b) == 8 {
		seq = binary.BigEndian.Uint64(b)
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return 0, err
	}
	if err := tx.Put(x.pendingKey(seq), []byte(id), 0); err != nil {
		return 0, err
	}
	return seq, tx.Put(x.queueKey(), binary.BigEndian.AppendUint64(nil, seq+1), 0)
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
	b, err := tx.Get(x.queueKey())
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
// number, as stored. Every change of a document's text queues it (a new
// sequence number) and every change of the segments or of the queue's
// low water mark writes Meta, so two reads that give the same State see
// the same candidates for any needle and the same text of every document
// but those removed since. A caller may keep what it read against it.
func (x Index) State(tx *storage.Tx) ([]byte, error) {
	var st []byte
	for _, k := range [][]byte{x.MetaKey(), x.queueKey()} {
		v, err := tx.Get(k)
		if errors.Is(err, storage.ErrNotFound) {
			st = append(st, 0) // absent: unlike any value, whose length is written plus one
			continue
		}
		if err != nil {
			return nil, err
		}
		st = binary.AppendUvarint(st, uint64(len(v))+1)
		st = append(st, v...)
	}
	return st, nil
}

// Package textindex is a trigram index of texts kept in ordinary keys of
// the store, beside the documents it indexes: a queue of documents whose
// text changed, written in the documents' own transactions; segments of
// postings that a background indexer makes from the queue and merges;
// and the candidates of a search, a superset of the documents that
// contain a folded phrase, which the caller verifies on the texts.
//
// The index knows documents only by their ids and reads their texts
// through Texts: what a document is (a saved item), when its text
// changes and how it is verified are the caller's. This is the seam where
// an engine's own index (PostgreSQL's pg_trgm over the same folded text)
// could answer Candidates instead.
//
// Keys, all under the index's prefix:
//
//	tp/<sequence>       a document whose text changed and is not indexed yet
//	tq                  the next sequence number of tp (8 bytes)
//	td/<id>             the document's number (4 bytes) in the trigram index
//	tn/<doc number>     the id of a document number (a re-indexed or removed
//	                    document's old number has none)
//	tg/<segment><tri>   the document numbers (ascending, uvarint deltas) of one
//	                    segment (4 bytes) that contain the 3 bytes of the folded text
//	tw/<id>             empty: a document with too many distinct trigrams for the
//	                    index (MaxDocTrigrams): every search verifies it
//	tm                  Meta: next document number and segment, the live
//	                    segments, a merge or deletion under way
//	ta                  the range of the document numbers of each live
//	                    segment, written with tm (a segment it lacks is read
//	                    whatever the numbers asked for, until measured)
//	tb                  the least and greatest order value (Texts.Order) of
//	                    each live segment's documents, written with tm (a
//	                    segment it lacks has no bounds until measured)
//	tc                  the runs of merged segments: the bounds of the parts
//	                    that were their sources (Run), written with tm
//
// tp is written in the same transaction as the text it stands for, and the
// indexer turns queued documents into a new segment in one transaction
// that also deletes their tp: the index is always consistent with the
// texts, whatever crashes when. Segments are merged as in a log-structured
// merge tree: eight of one size (a power of eight documents) become one,
// written under a new segment number that searches ignore until tm lists
// it in place of its sources (see Merge), so at most eight segments of
// each size are live. A search reads the candidates of the trigram index
// plus the queued documents; the index keeps no copy of the texts.
//
// tp is a queue rather than a set: the indexer consumes it from the low
// water mark in tm, so that neither it nor a search walks over the
// deletion markers of the entries it consumed (an LSM tree keeps them for
// a long time). tq makes concurrent writers of one index's queue conflict,
// so sequence numbers commit in their order and the low water mark never
// passes an entry not yet committed.
package textindex

import (
	"encoding/binary"
	"errors"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Index is one text index, its keys under a prefix of the store.
type Index struct{ prefix []byte }

// At returns the index whose keys lie under prefix (which ends in '/').
func At(prefix []byte) Index { return Index{prefix} }

// Texts gives the index the texts of its documents.
type Texts interface {
	// Text sets t to the folded text of document id (t.Reset, then its
	// fields and its order value, t.SetOrder), or reports false when the
	// document no longer exists.
	Text(tx *storage.Tx, id string, t *Text) (bool, error)
	// Order is the order value of document id, which Text sets: a value
	// the caller lists documents by (a saved item's createdAt) that never
	// changes while the document keeps its text. Each segment keeps the
	// bounds of its documents' values (Segment's Least and Most), so that
	// a caller reading candidates in that order (Ordered) knows when the
	// segments left cannot hold an earlier one.
	Order(tx *storage.Tx, id string) (uint64, bool, error)
}

func (x Index) key(name string) []byte {
	return append(append(make([]byte, 0, len(x.prefix)+len(name)+12), x.prefix...), name...)
}

func (x Index) pendingPrefix() []byte { return x.key("tp/") }
func (x Index) pendingKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(x.pendingPrefix(), seq)
}
func (x Index) queueKey() []byte { return x.key("tq") }

// DocKey is the key of document id's number.
func (x Index) DocKey(id string) []byte { return append(x.key("td/"), id...) }

// DocIDPrefix is the prefix of the keys from document numbers to ids.
func (x Index) DocIDPrefix() []byte { return x.key("tn/") }
func (x Index) docIDKey(doc uint32) []byte {
	return binary.BigEndian.AppendUint32(x.DocIDPrefix(), doc)
}
func (x Index) widePrefix() []byte { return x.key("tw/") }

// WideKey is the key listing document id as wide (too many trigrams).
func (x Index) WideKey(id string) []byte { return append(x.widePrefix(), id...) }

// TrigramPrefix is the prefix of every segment's postings.
func (x Index) TrigramPrefix() []byte { return x.key("tg/") }

// SegmentPrefix is the prefix of one segment's postings.
func (x Index) SegmentPrefix(seg uint32) []byte {
	return binary.BigEndian.AppendUint32(x.TrigramPrefix(), seg)
}

// MetaKey is the key of the index's Meta.
func (x Index) MetaKey() []byte { return x.key("tm") }

// rangesKey is the key of the segments' ranges: "ta", away from tq, which
// every writer of a text reads (on PostgreSQL a key written next to it by
// each indexing transaction made writers' transactions retry).
func (x Index) rangesKey() []byte { return x.key("ta") }

// boundsKey is the key of the segments' order bounds (tb, beside ta).
func (x Index) boundsKey() []byte { return x.key("tb") }

// runsKey is the key of the merged segments' runs (tc).
func (x Index) runsKey() []byte { return x.key("tc") }

// KeyNames are the names of the index's keys under its prefix (for
// measuring its size).
var KeyNames = []string{"tg", "td", "tn", "tm", "ta", "tb", "tc", "tp", "tq", "tw"}

// ErrStopped is returned by work the indexer's owner stopped.
var ErrStopped = errors.New("search index: stopped")

// ErrBadIndex is returned for an index key that does not decode.
var ErrBadIndex = errors.New("storage: malformed search index state")

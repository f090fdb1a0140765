package textindex

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Bounds of one indexing transaction: the distinct trigrams of one segment
// (a key each; Badger's transaction holds about 13,000 entries with the
// default 8 MiB memtable, and a batch's documents take up to about 2,500
// more for their queue and number keys), and those of one document: a
// document with more (a book) is not put in the trigram index but listed
// as wide (tw/), and every search reads it, so that it cannot stop the
// queue behind it.
const (
	maxSegmentKeys = 10000
	MaxDocTrigrams = 12000
)

// bitset is a set of document numbers or trigrams.
type bitset []uint64

func (b bitset) set(i uint32)      { b[i>>6] |= 1 << (i & 63) }
func (b bitset) has(i uint32) bool { return int(i>>6) < len(b) && b[i>>6]&(1<<(i&63)) != 0 }

// postingBuf is the indexer's scratch space: the (trigram, document)
// pairs of a batch and the radix sort's other buffer, a bit per possible
// trigram for the document's and the batch's distinct ones (2 MiB each,
// left cleared), and their lists.
type postingBuf struct {
	pairs, tmp         []uint64
	triSeen, batchSeen bitset
	keys, distinct     []uint32
	text               Text
}

// maxKeptPairs bounds the pairs' buffers kept between batches (8 MiB
// each): a batch of long texts may grow them further, for itself only.
const maxKeptPairs = 1 << 20

// spareBufs keeps one postingBuf from a batch to the next, strongly: a
// store's indexer is one goroutine, so one is what an import's stream of
// batches needs. (A sync.Pool lost it at every other collection, frequent
// while an import allocates, and each batch allocated and cleared 4 MiB
// and grew its pairs again.) The indexer drops it once it has been idle
// a while (dropSpareBufs), so that an idle store pins none of it.
var spareBufs struct {
	sync.Mutex
	b *postingBuf
}

func getPostingBuf() *postingBuf {
	spareBufs.Lock()
	b := spareBufs.b
	spareBufs.b = nil
	spareBufs.Unlock()
	if b == nil {
		b = &postingBuf{triSeen: make(bitset, 1<<24/64), batchSeen: make(bitset, 1<<24/64)}
	}
	return b
}

// putPostingBuf keeps b (emptied; its bitsets are left cleared by their
// users) for the next batch, without pairs' buffers grown past
// maxKeptPairs.
func putPostingBuf(b *postingBuf) {
	if cap(b.pairs) > maxKeptPairs {
		b.pairs = nil
	}
	if cap(b.tmp) > maxKeptPairs {
		b.tmp = nil
	}
	b.pairs, b.keys, b.distinct = b.pairs[:0], b.keys[:0], b.distinct[:0]
	spareBufs.Lock()
	spareBufs.b = b
	spareBufs.Unlock()
}

// dropSpareBufs lets the collector have the kept postingBuf.
func dropSpareBufs() {
	spareBufs.Lock()
	spareBufs.b = nil
	spareBufs.Unlock()
}

// queued is an entry of the queue: its sequence number and document.
type queued struct {
	seq uint64
	id  string
}

// IndexPending makes one segment of up to limit queued documents and
// returns how many entries it took.
func (x Index) IndexPending(tx *storage.Tx, texts Texts, limit int) (int, error) {
	meta, err := x.ReadMeta(tx)
	if err != nil {
		return 0, err
	}
	prefix := x.pendingPrefix()
	var entries []queued
	if err := tx.Scan(prefix, x.pendingKey(meta.PendingFrom), false, false, func(k, v []byte) (bool, error) {
		entries = append(entries, queued{binary.BigEndian.Uint64(k[len(prefix):]), string(v)})
		return len(entries) < limit, nil
	}); err != nil {
		return 0, err
	}
	if len(entries) == 0 {
		return 0, nil
	}
	// The postings as (trigram, document) pairs in the order of the
	// documents, sorted by trigram at the end (a stable radix sort keeps
	// each trigram's documents ascending), in reused buffers: less CPU
	// than a map of lists appended to.
	bufs := getPostingBuf()
	defer func() {
		for _, t := range bufs.keys {
			bufs.batchSeen[t>>6] = 0
		}
		putPostingBuf(bufs)
	}()
	nextDoc := meta.NextDoc
	done := map[string]bool{}
	taken := 0
	sg := Segment{ID: meta.NextSeg, Lo: meta.NextDoc, Least: math.MaxUint64, Ordered: true}
	for _, e := range entries {
		if !done[e.id] {
			added, err := x.addDoc(tx, texts, bufs, e.id, nextDoc, taken > 0)
			if err != nil {
				return 0, err
			}
			if added < 0 {
				break // the next transaction takes it
			}
			if added > 0 {
				sg.Least, sg.Most = min(sg.Least, bufs.text.order), max(sg.Most, bufs.text.order)
			}
			nextDoc += uint32(added)
			done[e.id] = true
		}
		if err := tx.Delete(x.pendingKey(e.seq)); err != nil {
			return 0, err
		}
		meta.PendingFrom = e.seq + 1
		taken++
	}
	if len(bufs.pairs) > 0 {
		if err := x.writePostings(tx, meta.NextSeg, sortPairsByTrigram(bufs.pairs, &bufs.tmp)); err != nil {
			return 0, err
		}
		sg.Docs, sg.Hi = nextDoc-meta.NextDoc, nextDoc
		meta.Segments = append(meta.Segments, sg)
		meta.NextSeg++
	}
	meta.NextDoc = nextDoc
	return taken, x.put(tx, meta)
}

// addDoc gives document id its place in the index, as number doc when it
// has a text with few enough trigrams, adding its postings to bufs, and
// returns how many numbers it took (0 or 1), or -1 when its trigrams
// would make the segment too big and others are in it already (notFirst).
func (x Index) addDoc(tx *storage.Tx, texts Texts, bufs *postingBuf, id string, doc uint32, notFirst bool) (int, error) {
	exists, err := texts.Text(tx, id, &bufs.text)
	if err != nil {
		return 0, err
	}
	// Each distinct trigram once: a bit per possible trigram (2 MiB,
	// reused), cleared after the document.
	distinct := bufs.distinct[:0]
	if exists {
		t := &bufs.text
		for i := range t.ends {
			f := t.field(i)
			for i := 0; i+3 <= len(f); i++ {
				if tri := uint32(f[i])<<16 | uint32(f[i+1])<<8 | uint32(f[i+2]); !bufs.triSeen.has(tri) {
					bufs.triSeen.set(tri)
					distinct = append(distinct, tri)
				}
			}
		}
		for _, tri := range distinct {
			bufs.triSeen[tri>>6] = 0
		}
	}
	bufs.distinct = distinct
	wide := len(distinct) > MaxDocTrigrams
	if !wide && notFirst && len(bufs.keys)+len(distinct) > maxSegmentKeys {
		return -1, nil
	}
	if err := x.place(tx, id, exists, wide, doc); err != nil {
		return 0, err
	}
	if !exists || wide {
		return 0, nil
	}
	for _, tri := range distinct {
		if !bufs.batchSeen.has(tri) {
			bufs.batchSeen.set(tri)
			bufs.keys = append(bufs.keys, tri)
		}
		bufs.pairs = append(bufs.pairs, uint64(tri)<<32|uint64(doc))
	}
	return 1, nil
}

// writePostings writes segment seg from its (trigram, document) pairs,
// sorted by trigram. One key and one value buffer serve every trigram:
// the engines copy what Put is given (kv.Writer).
func (x Index) writePostings(tx *storage.Tx, seg uint32, sorted []uint64) error {
	sp := x.SegmentPrefix(seg)
	k := append(make([]byte, 0, len(sp)+3), sp...)
	var v []byte
	for i := 0; i < len(sorted); {
		t := uint32(sorted[i] >> 32)
		j := i
		for j < len(sorted) && uint32(sorted[j]>>32) == t {
			j++
		}
		k = append(k[:len(sp)], byte(t>>16), byte(t>>8), byte(t))
		v = v[:0]
		prev := uint32(0)
		for _, pr := range sorted[i:j] {
			v = binary.AppendUvarint(v, uint64(uint32(pr)-prev))
			prev = uint32(pr)
		}
		if err := tx.Put(k, v, 0); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// sortPairsByTrigram sorts (trigram << 32 | document) pairs by trigram,
// keeping the order of the documents of each (an LSD radix sort on the
// trigram's three bytes, *tmp its other buffer); the result is a or *tmp.
func sortPairsByTrigram(a []uint64, tmp *[]uint64) []uint64 {
	if cap(*tmp) < len(a) {
		*tmp = make([]uint64, len(a))
	}
	t := (*tmp)[:len(a)]
	for shift := 32; shift < 56; shift += 8 {
		var count [256]int
		for _, v := range a {
			count[byte(v>>shift)]++
		}
		pos := 0
		for i, c := range count {
			count[i] = pos
			pos += c
		}
		for _, v := range a {
			b := byte(v >> shift)
			t[count[b]] = v
			count[b]++
		}
		a, t = t, a
	}
	return a
}

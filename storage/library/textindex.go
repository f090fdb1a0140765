package library

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"go.uber.org/zap"
)

// Search index of saved items. Free text matches as Inboxt's
// does (a case-insensitive substring of the title, description or content
// text); filters select by their own keys. All under u/<member>/gql/:
//
//	tt/<item id>                   (before version 4) a folded copy of the item's text,
//	                               deleted by the indexer
//	tp/<sequence>                  an item id whose text changed and is not indexed yet
//	tq                             the next sequence number of tp (8 bytes)
//	td/<item id>                   the item's document number (4 bytes) in the trigram index
//	tn/<doc number>                the item id of a document number (a re-indexed or
//	                               deleted item's old number has none)
//	tg/<segment><trigram>          the document numbers (ascending, uvarint deltas) of one
//	                               segment (4 bytes) that contain the 3 bytes of the folded text
//	tw/<item id>                   empty: an item with too many distinct trigrams for the index
//	                               (maxItemTrigrams): every search verifies it
//	tm                             textMeta: next document number and segment, the live
//	                               segments, a merge or deletion under way
//	tv                             searchIndexVersion once every item has its filter keys,
//	                               counts and a place in the index or the queue
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
//	ol/<label id>/<createdAt><id>  status code, domain: the items of a label, so ordered
//
// tp is written in the same transaction as the text it stands for, and
// the indexer (a goroutine of the store) turns pending items into
// a new segment in one transaction that also deletes their tp: the index
// is always consistent with the items, whatever crashes when. Segments are
// merged as in a log-structured merge tree: eight of one size (a power of
// eight documents) become one, written under a new segment number that
// searches ignore until tm lists it in place of its sources (see
// mergeSegments), so at most eight segments of each size are live. A search
// reads the candidates of the trigram index plus the pending items, and
// verifies each on its title, description and content text, folded as it
// reads them: the answer is exact, the index only narrows it. The index
// keeps no copy of the text: verifying on the content record (its HTML
// passed over, the text unescaped and folded, appendContentTextFolded)
// costs about what decompressing a folded copy did (bench/README.md).
//
// tp is a queue rather than a set: the indexer consumes it from the low
// water mark in tm, so that neither it nor a search walks over the deletion
// markers of the entries it consumed (an LSM tree keeps them for a long
// time). tq makes concurrent writers of one member's texts conflict, so
// sequence numbers commit in their order and the low water mark never
// passes an entry not yet committed.
//
// The storage engine seam (design/scale-out.md): the index is ordinary
// keys of the one ordered transactional store, read and written through Tx
// like every repository's, so it works unchanged on any engine of that
// interface and every node of a shared store sees the same index. The
// capability an engine may answer natively instead is textCandidates (the
// items that may contain a folded phrase, a superset): a PostgreSQL engine
// would answer it with pg_trgm over the same folded text; verification and
// everything after it stays here.
//
// Case folding: each character is mapped to one canonical character of its
// Unicode simple case folding orbit (foldRune), so "Σ", "σ" and "ς", or
// "K", "k" and the Kelvin sign, are the same; no multi-character folds
// ("ß" is not "ss") and no removal of diacritics ("é" is not "e").

func textKey(memberID, id string) []byte       { return storage.Key("u", memberID, "gql", "tt", id) }
func textPendingPrefix(memberID string) []byte { return storage.Key("u", memberID, "gql", "tp", "") }
func textPendingKey(memberID string, seq uint64) []byte {
	return encUint64(textPendingPrefix(memberID), seq)
}
func textQueueKey(memberID string) []byte   { return storage.Key("u", memberID, "gql", "tq") }
func textDocKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "td", id) }
func textDocItemKey(memberID string, doc uint32) []byte {
	return binary.BigEndian.AppendUint32(storage.Key("u", memberID, "gql", "tn", ""), doc)
}
func trigramPrefix(memberID string) []byte { return storage.Key("u", memberID, "gql", "tg", "") }
func textMetaKey(memberID string) []byte   { return storage.Key("u", memberID, "gql", "tm") }
func textReadyKey(memberID string) []byte  { return storage.Key("u", memberID, "gql", "tv") }
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
// putItem). The value is the item's status code (one byte) and its source
// domain in lower case: a walk passes over the items of other statuses,
// and those a site: filter does not select, without reading them.
func orderedTypePrefix(memberID, typ string) []byte {
	return storage.Key("u", memberID, "gql", "oy", typeCode(typ), "")
}
func orderedHighlightedPrefix(memberID string) []byte {
	return storage.Key("u", memberID, "gql", "oh", "")
}
func orderedLabelPrefix(memberID, labelID string) []byte {
	return storage.Key("u", memberID, "gql", "ol", labelID, "")
}

// searchIndexVersion is tv's value once a member's items have every key
// this version of the index reads; another value (or none) makes the
// indexer build them again (its writes are idempotent). Version 2 lacked
// the filter counts (fc/), which the indexer then counts; versions 2 and
// 3 kept a folded copy of each item's text (tt/), which it deletes;
// versions before 6 lacked the ordered filter keys (oy/, oh/, ol/) or (5)
// the domain in their values, which it writes.
const searchIndexVersion = 6

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

// --- case folding ---

// foldRune maps r to the lower case of the smallest character of its
// simple case folding orbit: one character for every member of the orbit.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return unicode.ToLower(least)
}

// appendFold appends s case-folded to b. storage.Invalid UTF-8 is kept as it is.
func appendFold[T string | []byte](b []byte, s T) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && n == 1 {
			b = append(b, c)
			i++
			continue
		}
		b = utf8.AppendRune(b, foldRune(r))
		i += n
	}
	return b
}

// FoldText returns s case-folded as search compares it.
func FoldText(s string) string { return string(appendFold(nil, s)) }

// --- the text a search reads ---

// textBufs holds buffers for folded texts (a search verifies many).
var textBufs = sync.Pool{New: func() any { return new(itemText) }}

// itemText is the folded title, description and content text of an item,
// one after the other in b, the fields ending at ends.
type itemText struct {
	b    []byte
	ends [3]int
}

func (t *itemText) fields() [3][]byte {
	return [3][]byte{t.b[:t.ends[0]], t.b[t.ends[0]:t.ends[1]], t.b[t.ends[1]:t.ends[2]]}
}

// contains reports whether a field holds the folded needle.
func (t *itemText) contains(needle []byte) bool {
	for _, f := range t.fields() {
		if bytes.Contains(f, needle) {
			return true
		}
	}
	return false
}

// readItemText sets t to the folded text of it (t.b reused), reading its
// content record (none: no content text). The content is folded only
// when the title and description do not hold needle (nil: always).
func readItemText(tx *storage.Tx, t *itemText, it *SavedItem, needle []byte) error {
	t.b = appendFold(t.b[:0], it.Title)
	t.ends[0] = len(t.b)
	t.b = appendFold(t.b, it.Description)
	t.ends[1] = len(t.b)
	t.ends[2] = len(t.b)
	if needle != nil && (bytes.Contains(t.b[:t.ends[0]], needle) || bytes.Contains(t.b[t.ends[0]:], needle)) {
		return nil
	}
	v, err := tx.Get(contentKey(it.MemberID, it.ID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	t.b, err = appendContentTextFolded(t.b, v)
	t.ends[2] = len(t.b)
	return err
}

// --- writes, in the item's transaction ---

// setItemText queues an item whose searchable text (title, description or
// content text) this transaction changes for the indexer, which reads the
// text the item then has.
func setItemText(tx *storage.Tx, memberID, id string) error {
	var seq uint64
	if b, err := tx.Get(textQueueKey(memberID)); err == nil && len(b) == 8 {
		seq = binary.BigEndian.Uint64(b)
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err := tx.Put(textPendingKey(memberID, seq), []byte(id), 0); err != nil {
		return err
	}
	if err := tx.Put(textQueueKey(memberID), encUint64(nil, seq+1), 0); err != nil {
		return err
	}
	libraryState.Of(tx).addTextMember(memberID)
	return nil
}

// --- filter counts ---

// Filter counts (fc/): how many of the member's items each filter key
// selects, so that a search combining filters starts from the smallest and
// knows what the others would cost without reading them:
//
//	fc/l/<label id>     items with the label (li/)
//	fc/t/<A|N>          articles, newsletters (ty/)
//	fc/h                items with highlights (hh/)
//	fc/s/<status code>  items per status (the ix/ indexes)
//	fc/d/<domain>       items per source domain (sd/)
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

// filterCount is the number of the member's items a filter key selects.
func filterCount(tx *storage.Tx, memberID, kind, value string) (int, error) {
	n, err := countAt(tx, filterCountKey(memberID, kind, value))
	return int(n), err
}

// --- the indexer ---

// textIndexer turns pending items into trigram segments in the background,
// and builds the text records and filter keys of stores written before the
// index existed: a Worker of each Store (textIndexerKind).
type textIndexer struct {
	s     Store
	mu    sync.Mutex
	dirty map[string]bool // members with work, or all when allDirty
	all   bool
	wake  chan struct{}
	stop  chan struct{}
	done  sync.WaitGroup
	// hold is read-held by each pass of the indexer and held by Restore
	// while Badger's Load runs: Load sets the next commit timestamp without
	// the lock its transactions read it under, so no transaction may run
	// beside it (badger v4.9.6 backup.go:268, found by the race detector).
	hold sync.RWMutex
	// broken (under hold) is set by a failed Restore: the store is thrown
	// away and its transactions would wait forever, so the indexer stops.
	broken bool
}

// textIndexerKind is the search indexer of each Store.
var textIndexerKind = storage.NewWorkerKind(func(st *storage.Store) *textIndexer {
	return &textIndexer{s: Of(st), dirty: map[string]bool{}, wake: make(chan struct{}, 1), stop: make(chan struct{})}
})

// textIndex is s's search indexer.
func (s Store) textIndex() *textIndexer { return textIndexerKind.Of(s.st) }

// Start starts the indexer (Worker).
func (ti *textIndexer) Start() {
	ti.done.Add(1)
	go ti.run()
}

// Look marks every member as having work (Worker): at Open and after a
// restore.
func (ti *textIndexer) Look() { ti.notify("") }

// Hold waits for the pass running and keeps the next from starting
// (Worker).
func (ti *textIndexer) Hold() { ti.hold.Lock() }

// Release lets passes run again, or none ever again when broken (Worker).
func (ti *textIndexer) Release(broken bool) {
	if broken {
		ti.broken = true
	}
	ti.hold.Unlock()
}

// Stop ends the indexer and waits for it (Worker).
func (ti *textIndexer) Stop() {
	close(ti.stop)
	ti.done.Wait()
}

// notify marks a member (or all, with "") as having work.
func (ti *textIndexer) notify(memberID string) {
	ti.mu.Lock()
	if memberID == "" {
		ti.all = true
	} else {
		ti.dirty[memberID] = true
	}
	ti.mu.Unlock()
	select {
	case ti.wake <- struct{}{}:
	default:
	}
}

// textBatch is the number of items one indexing transaction takes at most
// (halved when Badger finds the transaction too big).
const textBatch = 512

// textIndexDelay is how long the indexer lets texts gather after a change
// before it indexes them: a burst of saves (an import) becomes a few large
// segments rather than one per item, which costs less to write and merge.
// Searches meanwhile read those texts directly.
var textIndexDelay = 500 * time.Millisecond

func (ti *textIndexer) run() {
	defer ti.done.Done()
	for {
		select {
		case <-ti.stop:
			return
		case <-ti.wake:
		}
		if textIndexDelay > 0 {
			select {
			case <-ti.stop:
				return
			case <-time.After(textIndexDelay):
			}
		}
		if ti.pass() {
			return
		}
	}
}

// pass indexes what the members marked since the last pass have
// pending; true when the indexer is stopping.
func (ti *textIndexer) pass() (stopped bool) {
	ti.hold.RLock()
	defer ti.hold.RUnlock()
	if ti.broken {
		return true
	}
	ti.mu.Lock()
	all, dirty := ti.all, ti.dirty
	ti.all, ti.dirty = false, map[string]bool{}
	ti.mu.Unlock()
	s := ti.s
	if all {
		ms, err := members.Of(s.st).Members(s.st.Background())
		if err != nil {
			s.st.Logger().Warn("search index: cannot list members", zap.Error(err))
			return false
		}
		for _, m := range ms {
			dirty[m.ID] = true
		}
	}
	for mid := range dirty {
		if err := s.indexMember(mid); err != nil {
			if errors.Is(err, errTextIndexStopped) || s.st.Background().Err() != nil {
				return true
			}
			s.st.Logger().Warn("search index: indexing failed; retried at the next change or start", zap.Error(err))
		}
	}
	return false
}

var errTextIndexStopped = errors.New("search index: stopped")

// textIndexPaused keeps texts pending (tests of searches meanwhile).
var textIndexPaused atomic.Bool

func (s Store) textIndexStopping() bool {
	select {
	case <-s.textIndex().stop:
		return true
	default:
		return false
	}
}

// indexMember builds what a member's items lack, then indexes their
// pending texts.
func (s Store) indexMember(memberID string) error {
	if err := s.catchUpSearchKeys(memberID); err != nil {
		return err
	}
	limit := textBatch
	for {
		if s.textIndexStopping() {
			return errTextIndexStopped
		}
		if textIndexPaused.Load() {
			return nil // tests: texts stay pending
		}
		n := 0
		// Asynchronous: the index is rebuilt from the items if lost.
		err := s.st.UpdateAsync(s.st.Background(), func(tx *storage.Tx) error {
			var err error
			n, err = indexPending(tx, memberID, limit)
			return err
		})
		if errors.Is(err, kv.ErrTooBig) && limit > 1 {
			limit /= 2
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return s.mergeSegments(memberID)
		}
	}
}

// textMeta is the state of a member's trigram index (tm).
type textMeta struct {
	nextDoc, nextSeg uint32
	pendingFrom      uint64    // the low water mark of tp
	segs             []textSeg // live, oldest first
	merging          uint32    // a merge under way: its new segment, or 0
	mergeFrom        []uint32  // its sources
	deleting         []uint32  // merged segments whose keys are being deleted
}

type textSeg struct{ id, docs uint32 }

func (m *textMeta) encode() []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(m.nextDoc))
	b = binary.AppendUvarint(b, uint64(m.nextSeg))
	b = binary.AppendUvarint(b, uint64(m.merging))
	b = binary.AppendUvarint(b, m.pendingFrom)
	b = binary.AppendUvarint(b, uint64(len(m.segs)))
	for _, s := range m.segs {
		b = binary.AppendUvarint(b, uint64(s.id))
		b = binary.AppendUvarint(b, uint64(s.docs))
	}
	for _, l := range [][]uint32{m.mergeFrom, m.deleting} {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, v := range l {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	return b
}

var errBadTextMeta = errors.New("storage: malformed search index state")

func readTextMeta(tx *storage.Tx, memberID string) (*textMeta, error) {
	m := &textMeta{nextSeg: 1}
	b, err := tx.Get(textMetaKey(memberID))
	if errors.Is(err, storage.ErrNotFound) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || b[0] != 1 {
		return nil, errBadTextMeta
	}
	r := &recordReader{b: b, off: 1}
	u32 := func() uint32 {
		v := r.uvarint()
		if v > math.MaxUint32 {
			r.bad = true
		}
		return uint32(v)
	}
	m.nextDoc, m.nextSeg, m.merging = u32(), u32(), u32()
	m.pendingFrom = r.uvarint()
	n := r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		m.segs = append(m.segs, textSeg{u32(), u32()})
	}
	for _, l := range []*[]uint32{&m.mergeFrom, &m.deleting} {
		n := r.uvarint()
		for i := uint64(0); i < n && !r.bad; i++ {
			*l = append(*l, u32())
		}
	}
	if r.bad || r.off != len(b) {
		return nil, errBadTextMeta
	}
	return m, nil
}

func segmentPrefix(memberID string, seg uint32) []byte {
	return binary.BigEndian.AppendUint32(trigramPrefix(memberID), seg)
}

// indexPending makes one segment of up to limit pending items and returns
// how many it took.
func indexPending(tx *storage.Tx, memberID string, limit int) (int, error) {
	meta, err := readTextMeta(tx, memberID)
	if err != nil {
		return 0, err
	}
	prefix := textPendingPrefix(memberID)
	type entry struct {
		seq uint64
		id  string
	}
	var entries []entry
	if err := tx.Scan(prefix, textPendingKey(memberID, meta.pendingFrom), false, false, func(k, v []byte) (bool, error) {
		entries = append(entries, entry{binary.BigEndian.Uint64(k[len(prefix):]), string(v)})
		return len(entries) < limit, nil
	}); err != nil {
		return 0, err
	}
	if len(entries) == 0 {
		return 0, nil
	}
	nextDoc, seg := meta.nextDoc, meta.nextSeg
	// The postings as (trigram, document) pairs in the order of the
	// documents, sorted by trigram at the end (a stable radix sort keeps
	// each trigram's documents ascending), in reused buffers: less CPU
	// than a map of lists appended to (bench/README.md, "Save cost").
	bufs := postingBufs.Get().(*postingBuf)
	defer postingBufs.Put(bufs)
	pairs, triSeen, batchSeen := bufs.pairs[:0], bufs.triSeen, bufs.batchSeen
	keys, distinct := bufs.keys[:0], bufs.distinct[:0] // the batch's distinct trigrams, the item's
	defer func() {
		for _, t := range keys {
			batchSeen[t>>6] = 0
		}
		bufs.pairs, bufs.keys, bufs.distinct = pairs[:0], keys[:0], distinct[:0]
	}()
	var text itemText
	done := map[string]bool{}
	taken := 0
	for _, e := range entries {
		if !done[e.id] {
			var it SavedItem
			exists := true
			if err := getItem(tx, itemKey(memberID, e.id), &it); errors.Is(err, storage.ErrNotFound) {
				exists = false // deleted since
			} else if err != nil {
				return 0, err
			}
			// Each distinct trigram once: a bit per possible trigram (2
			// MiB, reused), cleared after the item.
			distinct = distinct[:0]
			if exists {
				if err := readItemText(tx, &text, &it, nil); err != nil {
					return 0, err
				}
				for _, f := range text.fields() {
					for i := 0; i+3 <= len(f); i++ {
						if t := uint32(f[i])<<16 | uint32(f[i+1])<<8 | uint32(f[i+2]); !triSeen.has(t) {
							triSeen.set(t)
							distinct = append(distinct, t)
						}
					}
				}
				for _, t := range distinct {
					triSeen[t>>6] = 0
				}
			}
			wide := len(distinct) > maxItemTrigrams
			if !wide && taken > 0 && len(keys)+len(distinct) > maxSegmentKeys {
				break // the next transaction takes it
			}
			if err := indexItem(tx, memberID, e.id, exists, wide, nextDoc); err != nil {
				return 0, err
			}
			if exists && !wide {
				for _, t := range distinct {
					if !batchSeen.has(t) {
						batchSeen.set(t)
						keys = append(keys, t)
					}
					pairs = append(pairs, uint64(t)<<32|uint64(nextDoc))
				}
				nextDoc++
			}
			done[e.id] = true
		}
		if err := tx.Delete(textPendingKey(memberID, e.seq)); err != nil {
			return 0, err
		}
		meta.pendingFrom = e.seq + 1
		taken++
	}
	sorted := sortPairsByTrigram(pairs, &bufs.tmp)
	sp := segmentPrefix(memberID, seg)
	for i := 0; i < len(sorted); {
		t := uint32(sorted[i] >> 32)
		j := i
		for j < len(sorted) && uint32(sorted[j]>>32) == t {
			j++
		}
		k := append(append(make([]byte, 0, len(sp)+3), sp...), byte(t>>16), byte(t>>8), byte(t))
		v := make([]byte, 0, j-i+4)
		prev := uint32(0)
		for _, pr := range sorted[i:j] {
			d := uint32(pr)
			v = binary.AppendUvarint(v, uint64(d-prev))
			prev = d
		}
		if err := tx.Put(k, v, 0); err != nil {
			return 0, err
		}
		i = j
	}
	if len(pairs) > 0 {
		meta.segs = append(meta.segs, textSeg{seg, nextDoc - meta.nextDoc})
		meta.nextSeg++
	}
	meta.nextDoc = nextDoc
	return taken, tx.Put(textMetaKey(memberID), meta.encode(), 0)
}

// postingBuf is the indexer's scratch space, reused (sync.Pool): the
// (trigram, document) pairs of a batch and the radix sort's other buffer,
// a bit per possible trigram for the item's and the batch's distinct ones
// (2 MiB each, left cleared), and their lists.
type postingBuf struct {
	pairs, tmp         []uint64
	triSeen, batchSeen bitset
	keys, distinct     []uint32
}

var postingBufs = sync.Pool{New: func() any {
	return &postingBuf{triSeen: make(bitset, 1<<24/64), batchSeen: make(bitset, 1<<24/64)}
}}

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

// Bounds of one indexing transaction: the distinct trigrams of one segment
// (a key each; Badger's transaction holds about 25,000 entries with the
// default memtable), and those of one item: an item with more (a book) is
// not put in the trigram index but listed as wide (tw/), and every search
// reads it, so that it cannot stop the queue behind it.
const (
	maxSegmentKeys  = 16000
	maxItemTrigrams = 12000
)

func textWideKey(memberID, id string) []byte { return storage.Key("u", memberID, "gql", "tw", id) }

// deleteIfPresent deletes k when it exists, writing no deletion marker
// otherwise.
func deleteIfPresent(tx *storage.Tx, k []byte) error {
	if ok, err := tx.Has(k); err != nil || !ok {
		return err
	}
	return tx.Delete(k)
}

// indexItem gives an item its new place in the index: its old document
// number is dropped; when it has a text, it gets doc (or, when wide, a tw/
// entry instead).
func indexItem(tx *storage.Tx, memberID, id string, hasText, wide bool, doc uint32) error {
	if old, err := tx.Get(textDocKey(memberID, id)); err == nil && len(old) == 4 {
		if err := tx.Delete(textDocItemKey(memberID, binary.BigEndian.Uint32(old))); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	// tw/ is deleted only when present: a deletion marker per indexed
	// item would lie in the range every search scans (textCandidates)
	// until Badger's compaction drops it.
	if err := deleteIfPresent(tx, textWideKey(memberID, id)); err != nil {
		return err
	}
	switch {
	case !hasText:
		return tx.Delete(textDocKey(memberID, id))
	case wide:
		if err := tx.Delete(textDocKey(memberID, id)); err != nil {
			return err
		}
		return tx.Put(textWideKey(memberID, id), nil, 0)
	}
	var d [4]byte
	binary.BigEndian.PutUint32(d[:], doc)
	if err := tx.Put(textDocKey(memberID, id), d[:], 0); err != nil {
		return err
	}
	return tx.Put(textDocItemKey(memberID, doc), []byte(id), 0)
}

// segmentLevel is a segment's size class: its documents' power of eight.
func segmentLevel(docs uint32) int {
	l := 0
	for docs >= 8 {
		docs /= 8
		l++
	}
	return l
}

// mergeChunk bounds the bytes of one transaction of a merge.
const mergeChunk = 1 << 20

// mergeSegments merges eight live segments of one size into one, as long
// as there are, and finishes a merge or deletion a crash interrupted.
// Steps, each its own transaction(s): tm records the merge; the merged
// segment's keys are written under its new number (searches do not read
// it yet); tm lists it instead of its sources and marks them for
// deletion; their keys are deleted; tm forgets them.
func (s Store) mergeSegments(memberID string) error {
	for {
		if s.textIndexStopping() {
			return errTextIndexStopped
		}
		var meta *textMeta
		if err := s.st.View(s.st.Background(), func(tx *storage.Tx) (err error) { meta, err = readTextMeta(tx, memberID); return err }); err != nil {
			return err
		}
		switch {
		case len(meta.deleting) > 0:
			for _, seg := range meta.deleting {
				if err := s.st.DeletePrefixInBatches(s.st.Background(), segmentPrefix(memberID, seg)); err != nil {
					return err
				}
			}
			if err := s.updateTextMeta(memberID, func(m *textMeta) { m.deleting = nil }); err != nil {
				return err
			}
			continue
		case meta.merging != 0:
			if err := s.writeMergedSegment(memberID, meta); err != nil {
				return err
			}
			err := s.updateTextMeta(memberID, func(m *textMeta) {
				var docs uint32
				var keep []textSeg
				for _, sg := range m.segs {
					if slices.Contains(m.mergeFrom, sg.id) {
						docs += sg.docs
					} else {
						keep = append(keep, sg)
					}
				}
				m.segs = append(keep, textSeg{m.merging, docs})
				m.deleting, m.merging, m.mergeFrom = m.mergeFrom, 0, nil
			})
			if err != nil {
				return err
			}
			continue
		}
		byLevel := map[int][]uint32{}
		pick := -1
		for _, sg := range meta.segs {
			l := segmentLevel(sg.docs)
			byLevel[l] = append(byLevel[l], sg.id)
			if len(byLevel[l]) >= 8 && (pick < 0 || l < pick) {
				pick = l
			}
		}
		if pick < 0 {
			return nil
		}
		from := byLevel[pick]
		if err := s.updateTextMeta(memberID, func(m *textMeta) {
			m.merging, m.mergeFrom = m.nextSeg, from
			m.nextSeg++
		}); err != nil {
			return err
		}
	}
}

func (s Store) updateTextMeta(memberID string, fn func(m *textMeta)) error {
	return s.st.Update(s.st.Background(), func(tx *storage.Tx) error {
		m, err := readTextMeta(tx, memberID)
		if err != nil {
			return err
		}
		fn(m)
		return tx.Put(textMetaKey(memberID), m.encode(), 0)
	})
}

// writeMergedSegment writes segment meta.merging: for every trigram, the
// live document numbers of meta.mergeFrom, from one snapshot, in
// transactions of about mergeChunk bytes.
func (s Store) writeMergedSegment(memberID string, meta *textMeta) error {
	return s.st.View(s.st.Background(), func(tx *storage.Tx) error {
		live := make(bitset, (int(meta.nextDoc)+63)/64)
		np := storage.Key("u", memberID, "gql", "tn", "")
		if err := tx.Scan(np, nil, false, true, func(k, _ []byte) (bool, error) {
			if len(k) == len(np)+4 {
				if d := binary.BigEndian.Uint32(k[len(np):]); d < meta.nextDoc {
					live.set(d)
				}
			}
			return true, nil
		}); err != nil {
			return err
		}
		type src struct {
			it     kv.Cursor
			prefix []byte
		}
		var srcs []src
		for _, seg := range meta.mergeFrom {
			p := segmentPrefix(memberID, seg)
			it := tx.Cursor(kv.Range{Prefix: p})
			defer it.Close()
			srcs = append(srcs, src{it, p})
		}
		target := segmentPrefix(memberID, meta.merging)
		var keys, vals [][]byte
		size := 0
		flush := func() error {
			if len(keys) == 0 {
				return nil
			}
			err := s.st.Update(s.st.Background(), func(w *storage.Tx) error {
				for i := range keys {
					if err := w.Put(keys[i], vals[i], 0); err != nil {
						return err
					}
				}
				return nil
			})
			keys, vals, size = keys[:0], vals[:0], 0
			return err
		}
		var docs []uint32
		for {
			// The smallest trigram among the sources.
			var tri []byte
			for _, sr := range srcs {
				if sr.it.Valid() {
					t := sr.it.Key()[len(sr.prefix):]
					if tri == nil || bytes.Compare(t, tri) < 0 {
						tri = append(tri[:0:0], t...)
					}
				}
			}
			if tri == nil {
				break
			}
			docs = docs[:0]
			for _, sr := range srcs {
				if !sr.it.Valid() || !bytes.Equal(sr.it.Key()[len(sr.prefix):], tri) {
					continue
				}
				err := cursorValue(sr.it, func(v []byte) error {
					doc := uint32(0)
					for len(v) > 0 {
						d, k := binary.Uvarint(v)
						if k <= 0 {
							return errBadTextMeta
						}
						v = v[k:]
						doc += uint32(d)
						if live.has(doc) {
							docs = append(docs, doc)
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				sr.it.Next()
			}
			if len(docs) == 0 {
				continue
			}
			slices.Sort(docs)
			docs = slices.Compact(docs)
			v := make([]byte, 0, len(docs)+4)
			prev := uint32(0)
			for _, d := range docs {
				v = binary.AppendUvarint(v, uint64(d-prev))
				prev = d
			}
			keys = append(keys, append(append([]byte{}, target...), tri...))
			vals = append(vals, v)
			size += len(v) + len(target) + 3 + 32
			if size >= mergeChunk || len(keys) >= 4000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		for _, sr := range srcs {
			if err := kv.CursorErr(sr.it); err != nil {
				return err // not the end of the postings: merge nothing
			}
		}
		return flush()
	})
}

// cursorValue calls fn with the value c is on.
func cursorValue(c kv.Cursor, fn func(v []byte) error) error {
	v, err := c.Value()
	if err != nil {
		return err
	}
	return fn(v)
}

// SearchIndexBacklog reports the work the search indexer has left for a
// member: texts pending, plus one for a build or merge not finished. 0
// means searches read only finished segments.
func (s Store) SearchIndexBacklog(ctx context.Context, memberID string) (int, error) {
	n := 0
	err := s.st.View(ctx, func(tx *storage.Tx) error {
		n = 0
		if v, err := searchVersion(tx, memberID); err != nil {
			return err
		} else if v != searchIndexVersion {
			n++
		}
		meta, err := readTextMeta(tx, memberID)
		if err != nil {
			return err
		}
		levels := map[int]int{}
		for _, sg := range meta.segs {
			if levels[segmentLevel(sg.docs)]++; levels[segmentLevel(sg.docs)] == 8 {
				n++ // a merge to come
			}
		}
		if meta.merging != 0 || len(meta.deleting) > 0 {
			n++
		}
		return tx.Scan(textPendingPrefix(memberID), textPendingKey(memberID, meta.pendingFrom), false, true, func(_, _ []byte) (bool, error) {
			n++
			return true, nil
		})
	})
	return n, err
}

// --- search ---

// maxCandidates is the largest candidate set a search reads item by item
// (then sorts); a larger one is left to the scan along the sort order.
const maxCandidates = 2000

// maxTrigrams is how many of the needle's trigrams (the rarest) a search
// intersects.
const maxTrigrams = 6

// bitset is a set of document numbers.
type bitset []uint64

func (b bitset) set(i uint32)      { b[i>>6] |= 1 << (i & 63) }
func (b bitset) has(i uint32) bool { return int(i>>6) < len(b) && b[i>>6]&(1<<(i&63)) != 0 }
func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// textCandidates returns the ids of the member's items that may contain
// the folded needle (pending items included), or ok false when the index
// cannot tell (not built, needle shorter than 3 bytes, more candidates than
// maxCandidates).
func textCandidates(tx *storage.Tx, memberID string, needle []byte, limit int) (ids []string, ok bool, err error) {
	if len(needle) < 3 {
		return nil, false, nil
	}
	if ready, err := searchReady(tx, memberID); err != nil || !ready {
		return nil, false, err
	}
	meta, err := readTextMeta(tx, memberID)
	if err != nil {
		return nil, false, err
	}
	nextDoc := meta.nextDoc
	if err := tx.Scan(textPendingPrefix(memberID), textPendingKey(memberID, meta.pendingFrom), false, false, func(_, v []byte) (bool, error) {
		ids = append(ids, string(v))
		return len(ids) <= limit, nil
	}); err != nil {
		return nil, false, err
	}
	wp := storage.Key("u", memberID, "gql", "tw", "")
	if err := tx.Scan(wp, nil, false, true, func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(wp):]))
		return len(ids) <= limit, nil
	}); err != nil {
		return nil, false, err
	}
	if len(ids) > limit {
		return nil, false, nil
	}
	// The needle's distinct trigrams, the rarest first (by the size of
	// their postings in the live segments).
	type tri struct {
		postings [][]byte
		size     int64
	}
	seen := map[string]bool{}
	var tris []tri
	k := trigramPrefix(memberID)
	n := len(k)
	for i := 0; i+3 <= len(needle); i++ {
		if seen[string(needle[i:i+3])] {
			continue
		}
		seen[string(needle[i:i+3])] = true
		var t tri
		for _, sg := range meta.segs {
			k = append(binary.BigEndian.AppendUint32(k[:n], sg.id), needle[i:i+3]...)
			v, err := tx.Get(k)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, false, err
			}
			t.postings = append(t.postings, v)
			t.size += int64(len(v))
		}
		if t.size == 0 { // no item has it: only pending items can match
			return ids, true, nil
		}
		tris = append(tris, t)
	}
	sort.Slice(tris, func(a, b int) bool { return tris[a].size < tris[b].size })
	if tris[0].size > 8*int64(limit) {
		// Even the rarest trigram is in far more items than limit (a
		// posting takes about one byte): a frequent phrase, which the
		// scan along the sort order finds soon.
		return nil, false, nil
	}
	if len(tris) > maxTrigrams {
		tris = tris[:maxTrigrams]
	}
	var set bitset
	for n, t := range tris {
		cur := make(bitset, (int(nextDoc)+63)/64)
		for _, v := range t.postings {
			err := func() error {
				doc := uint32(0)
				for len(v) > 0 {
					d, k := binary.Uvarint(v)
					if k <= 0 {
						return errBadTextMeta
					}
					v = v[k:]
					doc += uint32(d)
					if doc < nextDoc {
						cur.set(doc)
					}
				}
				return nil
			}()
			if err != nil {
				return nil, false, err
			}
		}
		if n == 0 {
			set = cur
		} else {
			for i := range set {
				set[i] &= cur[i]
			}
		}
	}
	if len(ids)+set.count() > limit {
		return nil, false, nil
	}
	for i, w := range set {
		for w != 0 {
			doc := uint32(i*64 + bits.TrailingZeros64(w))
			w &= w - 1
			id, err := tx.Get(textDocItemKey(memberID, doc))
			if errors.Is(err, storage.ErrNotFound) {
				continue // re-indexed or deleted
			}
			if err != nil {
				return nil, false, err
			}
			ids = append(ids, string(id))
		}
	}
	return ids, true, nil
}

// candidateFloor is the least limit of the cost model (a var: tests lower
// it to drive searches through the scan with a prefilter).
var candidateFloor = 100

// maxSourceItems bounds the ids one filter's keys give a search: filters
// that select more are checked per item, by key (idSource.has) or by the
// match of the scan along the sort order (a var: tests lower it).
var maxSourceItems = 10000

// idSource is a filter with keys of its own, read as a cursor over the
// ids of the items it selects (in any order, perhaps repeated): parts are
// read one after the other, a few at a time, so that a search can read
// several sources side by side and stop when the smallest ends. has, when
// not nil, tells by point lookups whether the filter selects one item.
type idSource struct {
	parts []idPart
	has   func(id uint64) (bool, error)
	// count is the number of ids the source has (from the filter
	// counts, or read), -1 unknown.
	count int
	// ordered, when not nil, is the prefix of the source's ordered
	// filter keys (oy/, oh/, ol/): its items in the order of createdAt.
	ordered []byte
	// inValue: the values of the ordered keys tell whether the source
	// selects an item (site:, by the domain).
	inValue bool

	part int
	it   kv.Cursor
	ids  []uint64
	done bool // every id read
	bad  bool // a key without an item id: the source is left to the scan
}

// idPart is one key range of a source: the keys under prefix from start
// (prefix when nil) up to a suffix of upper (nil: the end of the prefix).
type idPart struct {
	prefix, start, upper []byte
	decimal              bool // the suffix is the id in decimal (label keys), else its last 8 bytes
}

// readIDs reads src's ids until it holds more than upto or has them all.
func readIDs(tx *storage.Tx, src *idSource, upto int) {
	for !src.done && !src.bad && len(src.ids) <= upto {
		if src.it == nil {
			if src.part == len(src.parts) {
				src.done = true
				break
			}
			p := src.parts[src.part]
			src.it = tx.Cursor(kv.Range{Prefix: p.prefix, Start: p.start, KeysOnly: true})
		}
		p := src.parts[src.part]
		if !src.it.Valid() {
			if kv.CursorErr(src.it) != nil {
				src.bad = true // left to the scan
				break
			}
			src.close()
			src.part++
			continue
		}
		suf := src.it.Key()[len(p.prefix):]
		if p.upper != nil && bytes.Compare(suf, p.upper) >= 0 {
			src.close()
			src.part++
			continue
		}
		if p.decimal {
			id, err := strconv.ParseUint(string(suf), 10, 64)
			if err != nil {
				src.bad = true
				break
			}
			src.ids = append(src.ids, id)
		} else if len(suf) >= 8 {
			src.ids = append(src.ids, binary.BigEndian.Uint64(suf[len(suf)-8:]))
		}
		src.it.Next()
	}
	if src.done || src.bad {
		src.close()
	}
}

func (src *idSource) close() {
	if src.it != nil {
		src.it.Close()
		src.it = nil
	}
}

// siteSource is the source of the items of the domains that contain
// site (from the domains' counts, fc/d/), counted; for more than
// maxSiteDomains domains it has no parts (it is only counted).
func siteSource(tx *storage.Tx, memberID, site string) (*idSource, error) {
	prefix := filterCountKey(memberID, "d", "")
	var domains []string
	src := &idSource{}
	if err := tx.Scan(prefix, nil, false, false, func(k, v []byte) (bool, error) {
		if d := string(k[len(prefix):]); strings.Contains(strings.ToLower(d), site) && len(v) == 8 {
			domains = append(domains, d)
			src.count += int(binary.BigEndian.Uint64(v))
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	src.inValue = true
	if len(domains) > maxSiteDomains {
		return src, nil // a broad site: (".com"): the scan finds its items soon
	}
	for _, d := range domains {
		src.parts = append(src.parts, idPart{prefix: encString(siteItemsPrefix(memberID), d)})
	}
	if len(domains) <= 4 {
		src.has = func(id uint64) (bool, error) {
			for _, p := range src.parts {
				if ok, err := tx.Has(encUint64(p.prefix, id)); err != nil || ok {
					return ok, err
				}
			}
			return false, nil
		}
	}
	return src, nil
}

// maxSiteDomains is the most domains a site: search reads the items of;
// more, and it is left to the scan along the sort order.
const maxSiteDomains = 64

// rangeSource is the source of the items of statuses whose createdAt (or
// updatedAt) lies in [from, to).
func rangeSource(memberID string, statuses []string, field SortField, from, to *time.Time) *idSource {
	var lower, upper []byte
	if from != nil {
		lower = encUint64(encTime(nil, *from), 0)
	}
	if to != nil {
		upper = encUint64(encTime(nil, *to), 0)
	}
	src := &idSource{count: -1}
	for _, st := range statuses {
		prefix := itemIndexPrefix(memberID, st, field)
		var start []byte
		if lower != nil {
			start = append(append([]byte{}, prefix...), lower...)
		}
		src.parts = append(src.parts, idPart{prefix: prefix, start: start, upper: upper})
	}
	return src
}

// sortedIDs sorts ids and drops repeats.
func sortedIDs(ids []uint64) []uint64 {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// intersectIDs keeps in a (sorted) the ids also in b (sorted).
func intersectIDs(a, b []uint64) []uint64 {
	out := a[:0]
	j := 0
	for _, id := range a {
		for j < len(b) && b[j] < id {
			j++
		}
		if j < len(b) && b[j] == id {
			out = append(out, id)
		}
	}
	return out
}

// searchCandidates returns the ids of a small set of items that holds
// every match of f: the intersection of what the filters' keys and the
// trigram index give, or ok false when that is more than maxCandidates or
// none of them can tell.
//
// Sources are read up to the candidate limit first; when every one is
// larger, those of at most maxSourceItems ids are intersected, and the
// intersection is narrowed by point lookups in the keys of the larger
// ones (label, type, highlights) while it is no larger than
// maxSourceItems: whatever the selectivity of two filters, a search reads
// at most about maxSourceItems keys of each before it either reads the
// exact intersection item by item or walks the sort order skipping by key
// every item outside it.
func searchCandidates(tx *storage.Tx, memberID string, f ItemFilter, m *itemMatcher, statuses []string, field SortField, first int) (ids []string, ok bool, err error) {
	version, err := searchVersion(tx, memberID)
	if err != nil {
		return nil, false, err
	}
	ready := version >= 4 && version <= searchIndexVersion
	// A page in the order of createdAt can walk a filter's ordered keys.
	ordered := ready && version >= orderedKeysVersion && field == SortCreatedAt
	// Reading c candidates one by one costs about c point reads; the scan
	// along the sort order reads about first × items / c entries, each
	// about an eighth of a point read (measured on the search corpus):
	// candidates win while c² < first × items / 8.
	limit := maxCandidates
	items := 0.0 // about the number of the member's items
	if ready {
		meta, err := readTextMeta(tx, memberID)
		if err != nil {
			return nil, false, err
		}
		items = float64(meta.nextDoc)
		limit = min(maxCandidates, max(candidateFloor, int(math.Sqrt(float64(max(first, 1))*items/8))))
	}
	// Each filter that has keys is a source of ids, with the number of
	// items it selects: from the counts (fc/) once the index is built, or
	// by reading its ids up to a bound (then unknown when more).
	var srcs []*idSource
	defer func() {
		for _, src := range srcs {
			src.close()
		}
	}()
	for _, group := range m.labelsAll {
		src := &idSource{count: -1, has: func(id uint64) (bool, error) {
			s := strconv.FormatUint(id, 10)
			for _, l := range group {
				if ok, err := tx.Has(labelItemKey(memberID, l, s)); err != nil || ok {
					return ok, err
				}
			}
			return false, nil
		}}
		if ready {
			src.count = 0
		}
		if ordered && len(group) == 1 {
			src.ordered = orderedLabelPrefix(memberID, group[0])
		}
		for _, l := range group {
			src.parts = append(src.parts, idPart{prefix: labelItemKey(memberID, l, ""), decimal: true})
			if ready {
				n, err := filterCount(tx, memberID, "l", l)
				if err != nil {
					return nil, false, err
				}
				src.count += n
			}
		}
		srcs = append(srcs, src)
	}
	if f.SavedFrom != nil || f.SavedTo != nil {
		srcs = append(srcs, rangeSource(memberID, statuses, SortCreatedAt, f.SavedFrom, f.SavedTo))
	}
	if f.UpdatedFrom != nil || f.UpdatedTo != nil {
		srcs = append(srcs, rangeSource(memberID, statuses, SortUpdatedAt, f.UpdatedFrom, f.UpdatedTo))
	}
	if ready && f.Site != "" {
		src, err := siteSource(tx, memberID, strings.ToLower(f.Site))
		if err != nil {
			return nil, false, err
		}
		srcs = append(srcs, src)
	}
	if ready && f.Type != "" {
		prefix := typeItemsPrefix(memberID, f.Type)
		n, err := filterCount(tx, memberID, "t", typeCode(f.Type))
		if err != nil {
			return nil, false, err
		}
		src := &idSource{parts: []idPart{{prefix: prefix}}, count: n,
			has: func(id uint64) (bool, error) { return tx.Has(encUint64(prefix, id)) }}
		if ordered {
			src.ordered = orderedTypePrefix(memberID, f.Type)
		}
		srcs = append(srcs, src)
	}
	if ready && f.HasHighlights != nil && *f.HasHighlights {
		prefix := highlightedItemsPrefix(memberID)
		n, err := filterCount(tx, memberID, "h", "")
		if err != nil {
			return nil, false, err
		}
		src := &idSource{parts: []idPart{{prefix: prefix}}, count: n,
			has: func(id uint64) (bool, error) { return tx.Has(encUint64(prefix, id)) }}
		if ordered {
			src.ordered = orderedHighlightedPrefix(memberID)
		}
		srcs = append(srcs, src)
	}
	// Sources without a count are read up to limit: a small one is as
	// good as counted, a larger one is left to the match of each item.
	for _, src := range srcs {
		if src.count < 0 {
			if readIDs(tx, src, limit); src.done {
				src.ids = sortedIDs(src.ids)
				src.count = len(src.ids)
			}
		}
	}
	// The counted sources, ascending, the first that has keys to read
	// first (one without, a broad site:, only counts).
	var counted []*idSource
	for _, src := range srcs {
		if src.count >= 0 {
			counted = append(counted, src)
		}
	}
	slices.SortStableFunc(counted, func(a, b *idSource) int { return a.count - b.count })
	if i := slices.IndexFunc(counted, func(src *idSource) bool { return src.parts != nil }); i > 0 {
		base := counted[i]
		counted = slices.Insert(slices.Delete(counted, i, i+1), 0, base)
	} else if i < 0 {
		counted = nil
	}
	// Free text the trigram index narrows to a few candidates first:
	// filters need not be read then (the candidates' items are matched).
	var text []string
	textSmall := false
	if m.needle != nil && (len(counted) == 0 || counted[0].count > 50) {
		if text, textSmall, err = textCandidates(tx, memberID, m.needle, limit); err != nil {
			return nil, false, err
		}
		if textSmall && (len(counted) == 0 || counted[0].count > limit) {
			return text, true, nil
		}
	}
	var cand []uint64
	haveCand := false
	switch plan := planSearch(tx, memberID, ready, counted, m, statuses, first, limit); plan.kind {
	case planOrdered:
		m.ordered = &plan
		return nil, false, nil
	case planCandidates, planPrefilter:
		base := counted[0]
		if !base.done {
			if readIDs(tx, base, maxSourceItems); !base.done || base.bad {
				break // more than counted (a count behind): the walk
			}
			base.ids = sortedIDs(base.ids)
		}
		inter := slices.Clone(base.ids)
		for i, src := range counted[1:] {
			switch plan.narrow[i] {
			case narrowRead:
				if readIDs(tx, src, maxSourceItems); src.done && !src.bad {
					src.ids = sortedIDs(src.ids)
					inter = intersectIDs(inter, src.ids)
				}
			case narrowProbe:
				kept := inter[:0]
				for _, id := range inter {
					ok, err := src.has(id)
					if err != nil {
						return nil, false, err
					}
					if ok {
						kept = append(kept, id)
					}
				}
				inter = kept
			}
			src.close()
		}
		if len(inter) <= maxCandidates && (plan.kind == planCandidates || (len(inter) <= limit && forcePlan != planPrefilter)) {
			cand, haveCand = inter, true
			break
		}
		// Too many to read one by one, few enough to skip the others
		// along the sort order without reading them.
		m.prefilter = make(map[uint64]struct{}, len(inter))
		for _, id := range inter {
			m.prefilter[id] = struct{}{}
		}
	}
	if textSmall && haveCand {
		var both []string
		for _, id := range text {
			if _, found := slices.BinarySearch(cand, idBytes(id)); found {
				both = append(both, id)
			}
		}
		return both, true, nil
	}
	if textSmall {
		return text, true, nil
	}
	if !haveCand {
		return nil, false, nil
	}
	ids = make([]string, len(cand))
	for i, id := range cand {
		ids[i] = strconv.FormatUint(id, 10)
	}
	return ids, true, nil
}

// orderedPage fills page by m.ordered's plan: the entries of one filter's
// ordered keys (the page's order: createdAt), from after, within lower and
// upper; an entry of another status is passed over by its value, one
// another filter's keys lack by a probe, the others read and matched,
// until first+1 match. The walk counts in the search budget like the walk
// along the sort order.
func orderedPage(tx *storage.Tx, m *itemMatcher, statuses []string, p PageRequest, after, lower, upper []byte, page *ItemPage) error {
	plan := m.ordered
	var codes []byte
	for _, st := range statuses {
		codes = append(codes, statusCode[st][0])
	}
	var site []byte // a site: filter, checked on the domain in the value
	if m.f.Site != "" {
		site = []byte(strings.ToLower(m.f.Site))
	}
	first := max(p.First, 0)
	found := make([]*SavedItem, 0, min(first, 1000)+1)
	var sufs [][]byte
	k := itemKey(m.memberID, "")
	n := len(k)
	passed := func() error { // an entry passed over without reading its item
		m.examined++
		over, err := m.overBudget()
		if err == nil && over {
			err = ErrSearchTooBroad
		}
		return err
	}
	err := keysetScan(tx, plan.ordered.ordered, p.Desc, after, lower, upper, true, func(suf, v []byte) (bool, error) {
		if len(suf) < 8 {
			return true, nil
		}
		if len(v) >= 1 && bytes.IndexByte(codes, v[0]) < 0 {
			return true, passed()
		}
		if site != nil && len(v) >= 1 && !bytes.Contains(v[1:], site) {
			return true, passed()
		}
		id := binary.BigEndian.Uint64(suf[len(suf)-8:])
		for _, src := range plan.probes {
			ok, err := src.has(id)
			if err != nil {
				return false, err
			}
			if !ok {
				return true, passed()
			}
		}
		it := new(SavedItem)
		k = strconv.AppendUint(k[:n], id, 10)
		if err := getItem(tx, k, it); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return true, nil
			}
			return false, err
		}
		if !contains(statuses, it.Status) {
			return true, passed()
		}
		ok, err := m.matchWithinBudget(it)
		if err != nil || !ok {
			return err == nil, err
		}
		found = append(found, it)
		sufs = append(sufs, append([]byte(nil), suf...))
		return len(found) <= first, nil
	})
	if err != nil {
		return err
	}
	if len(found) > first {
		page.HasNext = true
		found, sufs = found[:first], sufs[:first]
	}
	page.Items = found
	page.Cursors = make([]string, len(sufs))
	for i, suf := range sufs {
		page.Cursors[i] = makeCursor(1, p.Field, p.Desc, suf)
	}
	return nil
}

// The cost model of a search combining filters (microseconds, measured by
// TestSearchCostsOnSeededStore on the 100,000-item search corpus; their
// ratios matter, not their values): reading one id of a filter's keys,
// one point lookup in a filter's keys, reading an item by id (candidates),
// one entry of the walk along the sort order read and decoded, and one
// passed over by its key (a prefilter).
const (
	costKey   = 0.3
	costProbe = 1.3
	costRead  = 8.0
	costWalk  = 1.8
	costSkip  = 1.2
)

type planKind int

const (
	planWalk       planKind = iota // the walk along the sort order, matching each item
	planCandidates                 // read the ids of the smallest, narrow, read those items and sort
	planPrefilter                  // read the ids of the smallest, narrow; the walk passes over the others by key
	planOrdered                    // walk the ordered keys of one filter, probe others by key, read and match the rest (orderedPage)
)

type narrowKind int

const (
	narrowNone  narrowKind = iota // checked by the match of each item read
	narrowRead                    // its ids read and intersected
	narrowProbe                   // each id looked up in its keys
)

// searchPlan is how a search combines its filters: counted (ascending)
// narrowed one after the other, narrow[i] saying how for counted[i+1].
type searchPlan struct {
	kind   planKind
	narrow []narrowKind
	// planOrdered: the filter whose ordered keys are walked, and the
	// others looked up by key on each of its items before it is read.
	ordered *idSource
	probes  []*idSource
}

// tracePlan, when set, is told each plan's figures (the seeded store's
// benchmark prints them).
var tracePlan func(string)

// forcePlan, when not planWalk, makes every search with counted filters
// take that plan where it can (tests: each plan must give the same
// answers).
var forcePlan planKind

// planSearch chooses the cheapest way to combine the counted filters
// (ascending by count), by the cost model above: the items expected to
// match are the statuses' items times each filter's share of all items
// (as if independent), and the walk along the sort order reads each
// status's entries until first+1 of them match.
func planSearch(tx *storage.Tx, memberID string, ready bool, counted []*idSource, m *itemMatcher, statuses []string, first, limit int) searchPlan {
	if len(counted) == 0 {
		return searchPlan{kind: planWalk}
	}
	base := counted[0]
	narrow := make([]narrowKind, len(counted)-1)
	var perStatus []float64
	all := 0.0
	if ready {
		for st, c := range statusCode {
			n, err := filterCount(tx, memberID, "s", c)
			if err != nil {
				n = 0
			}
			all += float64(n)
			if contains(statuses, st) {
				perStatus = append(perStatus, float64(n))
			}
		}
	}
	// The smallest filter with ordered keys (a page in their order).
	var ordered *idSource
	for _, src := range counted {
		if src.ordered != nil {
			ordered = src
			break
		}
	}
	if forcePlan == planOrdered && ordered != nil {
		plan := searchPlan{kind: planOrdered, ordered: ordered}
		for i, src := range counted {
			if src != ordered && src.has != nil && !src.inValue && i%2 == 0 { // the others left to the match
				plan.probes = append(plan.probes, src)
			}
		}
		return plan
	}
	if !ready || all == 0 || (forcePlan != planWalk && forcePlan != planOrdered) {
		// Without counts: the smallest read one by one when small, else
		// a prefilter when it can be one.
		kind := forcePlan
		if kind == planOrdered {
			kind = planWalk
		}
		if kind == planWalk {
			kind = planCandidates
			if base.count > limit {
				kind = planPrefilter
			}
		}
		if base.count > maxSourceItems {
			return searchPlan{kind: planWalk}
		}
		for i, src := range counted[1:] {
			if src.parts != nil {
				narrow[i] = narrowRead
			}
			if src.has != nil && (src.count > maxSourceItems || src.parts == nil || (forcePlan != planWalk && i%2 == 1)) {
				narrow[i] = narrowProbe
			}
		}
		return searchPlan{kind: kind, narrow: narrow}
	}
	inStatuses := 0.0
	for _, n := range perStatus {
		inStatuses += n
	}
	share := 1.0
	for _, src := range counted {
		share *= min(float64(src.count)/all, 1)
	}
	expect := max(inStatuses*share, 0.5)
	// The entries the walk reads, over the statuses: until first+1 match
	// (a later status stops where the first+1 of those before end).
	walked := min(inStatuses, float64(first+1)*inStatuses/expect)
	costWalkPlan := walked * costWalk
	// The ordered keys of a filter: its entries until first+1 match, each
	// passed over by its status or a probe of another filter, or read.
	costOrdered, orderedPlan := math.Inf(1), searchPlan{kind: planOrdered, ordered: ordered}
	if ordered != nil {
		co := float64(ordered.count)
		walkedO := min(co, float64(first+1)*co/expect)
		surv := walkedO * inStatuses / all
		costOrdered = walkedO * costSkip
		for _, src := range counted {
			if src != ordered && src.inValue { // checked on the values walked
				surv *= min(float64(src.count)/all, 1)
			}
		}
		for _, src := range counted {
			if src == ordered || src.has == nil || src.inValue {
				continue
			}
			after := surv * min(float64(src.count)/all, 1)
			if (surv-after)*costRead < surv*costProbe {
				continue
			}
			costOrdered += surv * costProbe
			orderedPlan.probes = append(orderedPlan.probes, src)
			surv = after
		}
		costOrdered += surv * costRead
	}
	if base.count > maxSourceItems {
		if costOrdered < costWalkPlan {
			return orderedPlan
		}
		return searchPlan{kind: planWalk}
	}
	// A prefilter of the smallest's ids (narrowing it saves little of
	// the walk).
	costPrefilter := float64(base.count)*costKey + walked*(costSkip+costWalk*float64(base.count)/all)
	// Candidates: the smallest's ids, each other filter read or probed
	// (the cheaper) while it narrows, then the items read.
	c := float64(base.count)
	costCand := c * costKey
	for i, src := range counted[1:] {
		read, probe := math.Inf(1), math.Inf(1)
		if src.count <= maxSourceItems && src.parts != nil {
			read = float64(src.count) * costKey
		}
		if src.has != nil {
			probe = c * costProbe
		}
		if math.IsInf(min(read, probe), 1) {
			continue
		}
		// Worth it when it saves more item reads than it costs.
		after := c * min(float64(src.count)/all, 1)
		if (c-after)*costRead < min(read, probe) {
			continue
		}
		if read <= probe {
			narrow[i] = narrowRead
			costCand += read
		} else {
			narrow[i] = narrowProbe
			costCand += probe
		}
		c = after
	}
	costCand += c * costRead
	if tracePlan != nil {
		counts := make([]int, len(counted))
		for i, src := range counted {
			counts[i] = src.count
		}
		tracePlan(fmt.Sprintf("counts %v expect %.0f walked %.0f: walk %.0f µs, prefilter %.0f µs, candidates %.0f µs (%v, %.0f), ordered %.0f µs",
			counts, expect, walked, costWalkPlan, costPrefilter, costCand, narrow, c, costOrdered))
	}
	switch {
	case costOrdered < costCand && costOrdered < costPrefilter && costOrdered < costWalkPlan:
		return orderedPlan
	case costCand <= costPrefilter && costCand <= costWalkPlan && c <= maxCandidates:
		return searchPlan{kind: planCandidates, narrow: narrow}
	case costPrefilter < costWalkPlan:
		return searchPlan{kind: planPrefilter, narrow: make([]narrowKind, len(narrow))}
	}
	return searchPlan{kind: planWalk}
}

// SearchIndexSize sums the bytes (keys and values, before Badger's
// compression) of a member's search keys: the folded texts of older
// stores (tt), the trigram index (tg, td, tn, tm, tp, tq) and the filter
// keys and counts (sd, sn, ty, hh, fc, oy, oh, ol).
func (s Store) SearchIndexSize(ctx context.Context, memberID string) (texts, trigrams, filters int64, err error) {
	err = s.st.View(ctx, func(tx *storage.Tx) error {
		texts, trigrams, filters = 0, 0, 0
		for _, p := range []struct {
			name string
			n    *int64
		}{{"tt", &texts}, {"tg", &trigrams}, {"td", &trigrams}, {"tn", &trigrams}, {"tm", &trigrams}, {"tp", &trigrams},
			{"tq", &trigrams}, {"tw", &trigrams}, {"sd", &filters}, {"sn", &filters}, {"ty", &filters}, {"hh", &filters}, {"fc", &filters},
			{"oy", &filters}, {"oh", &filters}, {"ol", &filters}} {
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

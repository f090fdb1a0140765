package storage

import (
	"bytes"
	"strings"
	"sync"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// recordCacheSize bounds each record cache. Past the bound an arbitrary
// entry makes room.
const recordCacheSize = 4096

// RecordCache keeps recently read records of one kind (the keys under one
// prefix), decoded, so that the reads every request makes — the OAuth
// client on every token request, the access token and its member on every
// API call — are a map lookup instead of a read transaction and a JSON
// decode. The records hold digests, never secrets.
//
// Every write to a key goes through Tx.put or Tx.delete, which note the
// keys under a cached prefix; update drops those entries once the commit
// is done, before Update returns, and Restore drops them all. So a change
// (a revoked token, a suspended member) is seen by every request that
// starts after the change returned. A read that started before such a drop
// must not put the old record back: add takes the generation read before
// the read transaction began and does nothing if a drop happened since.
//
// Several nodes (a store on a shared engine, PostgreSQL): the writing node
// drops as above, and its transaction also notifies every node on
// cacheChannel, in the same commit (Store.update, cacheNotes); each node
// drops those keys when the notification arrives (Store.onCacheNote), so
// another node sees the change within the notification's delay. While the
// engine may be missing notifications (its listener is down) the caches
// are bypassed, and they are emptied before they are trusted again (live).
type RecordCache[T any] struct {
	prefix []byte
	// size bounds the entries (0: recordCacheSize).
	size int
	// live, when set (a shared engine), says whether the cache may be
	// trusted now and in which listener epoch (kv.LiveEpochs): entries of
	// an earlier epoch are dropped before any is served.
	live func() (epoch uint64, ok bool)

	mu      sync.RWMutex
	gen     uint64
	epoch   uint64
	records map[string]*T // by key suffix
}

func newRecordCache[T any](prefix []byte, live func() (uint64, bool)) *RecordCache[T] {
	return &RecordCache[T]{prefix: prefix, live: live, records: make(map[string]*T)}
}

// Generation is to be read before a read transaction whose records go to
// Add.
func (c *RecordCache[T]) Generation() uint64 {
	if c.live != nil {
		if epoch, ok := c.live(); ok {
			c.newEpoch(epoch) // so that the add after this read is not refused
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// Get returns a shallow copy of the cached record (callers may change its
// fields but only read its slices), or nil.
func (c *RecordCache[T]) Get(id string) *T {
	var epoch uint64
	if c.live != nil {
		var ok bool
		if epoch, ok = c.live(); !ok {
			return nil // notifications may be missed: read the store
		}
	}
	c.mu.RLock()
	if epoch != c.epoch {
		c.mu.RUnlock()
		c.newEpoch(epoch)
		return nil
	}
	r, ok := c.records[id]
	if !ok {
		c.mu.RUnlock()
		return nil
	}
	cp := *r
	c.mu.RUnlock()
	return &cp
}

// Add caches a copy of rec, the record of id (its key is the cache's
// prefix followed by id) read in a transaction that began after Generation
// returned gen.
func (c *RecordCache[T]) Add(gen uint64, id string, rec *T) {
	var epoch uint64
	if c.live != nil {
		var ok bool
		if epoch, ok = c.live(); !ok {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || epoch != c.epoch {
		return
	}
	if len(c.records) >= recordCacheSize || (c.size > 0 && len(c.records) >= c.size) {
		for k := range c.records {
			delete(c.records, k)
			break
		}
	}
	cp := *rec
	c.records[id] = &cp
}

// drop forgets the records at the given keys that are under the cache's
// prefix (all of them for nil).
func (c *RecordCache[T]) drop(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if keys == nil {
		clear(c.records)
		return
	}
	for _, k := range keys {
		if id, ok := bytes.CutPrefix([]byte(k), c.prefix); ok {
			delete(c.records, string(id))
		}
	}
}

// newEpoch empties the cache for the listener's epoch (once).
func (c *RecordCache[T]) newEpoch(epoch uint64) {
	c.mu.RLock()
	same := c.epoch == epoch
	c.mu.RUnlock()
	if same {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		c.epoch = epoch
		c.gen++
		clear(c.records)
	}
}

// keyPrefix is the prefix of the keys of the cached records.
func (c *RecordCache[T]) keyPrefix() []byte { return c.prefix }

// recordCaches are what caches hold of a RecordCache of any record type.
type recordCaches interface {
	drop(keys []string)
	keyPrefix() []byte
}

// CacheKind is one kind of cached record: the records under one key
// prefix, of type T. A package declares its kinds in package-level
// variables (NewCacheKind), so every kind exists before any store is
// prepared; each Store then holds one cache of each kind (CacheKind.Of),
// whichever handle asks for it, and every write under the prefix drops
// the written record from it on every node (noteWrite, cacheNotes).
type CacheKind[T any] struct {
	i      int
	prefix []byte
}

// cacheKinds are the kinds declared, in order; written only by
// NewCacheKind during package initialization. Declared kinds, like context
// keys, give each Store a slot per domain without storage importing the
// domains.
var cacheKinds []func(live func() (uint64, bool)) recordCaches

// NewCacheKind declares the kind of the records of type T under prefix.
// Call it only to initialize a package-level variable.
func NewCacheKind[T any](prefix []byte) *CacheKind[T] { return NewSizedCacheKind[T](prefix, 0) }

// NewSizedCacheKind is NewCacheKind for records large enough that a cache
// holds fewer of them than recordCacheSize: at most entries (0:
// recordCacheSize).
func NewSizedCacheKind[T any](prefix []byte, entries int) *CacheKind[T] {
	k := &CacheKind[T]{i: len(cacheKinds), prefix: prefix}
	cacheKinds = append(cacheKinds, func(live func() (uint64, bool)) recordCaches {
		c := newRecordCache[T](prefix, live)
		c.size = entries
		return c
	})
	return k
}

// Of returns s's cache of this kind.
func (k *CacheKind[T]) Of(s *Store) *RecordCache[T] {
	return s.caches.all[k.i].(*RecordCache[T])
}

// caches are a Store's record caches, one of each kind.
type caches struct {
	all []recordCaches // by CacheKind.i
}

// newCaches returns empty caches; live is nil for a store only one process
// uses (Badger), else the engine's kv.LiveEpochs (RecordCache.live).
func newCaches(live func() (uint64, bool)) caches {
	c := caches{all: make([]recordCaches, len(cacheKinds))}
	for i, mk := range cacheKinds {
		c.all[i] = mk(live)
	}
	return c
}

// drop forgets the cached records at keys (all of them for nil).
func (c caches) drop(keys []string) {
	for _, rc := range c.all {
		rc.drop(keys)
	}
}

// noteWrite records in tx a write to key that cached records depend on.
func (tx *Tx) noteWrite(key []byte) {
	if tx.st == nil {
		return
	}
	for _, rc := range tx.st.caches.all {
		if bytes.HasPrefix(key, rc.keyPrefix()) {
			tx.cachedWritten = append(tx.cachedWritten, string(key))
			return
		}
	}
}

// cacheChannel carries, from every node's commits, the keys of the cached
// records they wrote: each payload is the sending node's id (Store.node), a
// newline, and the keys, newline-separated, or cacheDropAll. A node skips
// its own (it dropped them when the commit returned).
const cacheChannel = "hearth_cache"

// cacheDropAll is the body that drops every cached record: keys that do
// not fit in a few notifications, or that are not plain ASCII; a restore.
const cacheDropAll = "*"

// maxCacheNotes bounds the notifications one commit sends for its keys;
// beyond, it sends cacheDropAll.
const maxCacheNotes = 4

// cacheNotes returns the payloads from node telling every other node to
// drop keys: the keys, each payload at most kv.MaxPayload bytes, or
// cacheDropAll alone.
func cacheNotes(node string, keys []string) []string {
	all := []string{node + "\n" + cacheDropAll}
	var notes []string
	var b strings.Builder
	b.WriteString(node)
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		for i := 0; i < len(k); i++ {
			if k[i] <= ' ' || k[i] > '~' {
				return all // no NUL, newline or invalid text in a notification
			}
		}
		if len(node)+1+len(k) > kv.MaxPayload {
			return all
		}
		if b.Len()+1+len(k) > kv.MaxPayload {
			if notes = append(notes, b.String()); len(notes) == maxCacheNotes {
				return all
			}
			b.Reset()
			b.WriteString(node)
		}
		b.WriteByte('\n')
		b.WriteString(k)
	}
	if b.Len() > len(node) {
		notes = append(notes, b.String())
	}
	return notes
}

// onCacheNote drops what a notification on cacheChannel names (keys,
// cacheDropAll), unless this node sent it, or everything on kv.Missed
// (notifications were lost).
func (s *Store) onCacheNote(payload string) {
	if payload == kv.Missed {
		s.caches.drop(nil)
		return
	}
	node, body, _ := strings.Cut(payload, "\n")
	switch {
	case node == s.node:
	case body == cacheDropAll:
		s.caches.drop(nil)
	default:
		s.caches.drop(strings.Split(body, "\n"))
	}
}

// cacheLive is recordCache.live for a store on a shared engine: not
// trusted before the engine is open.
func (s *Store) cacheLive() (uint64, bool) {
	le := s.liveEpochs.Load()
	if le == nil {
		return 0, false
	}
	return (*le).LiveEpoch()
}

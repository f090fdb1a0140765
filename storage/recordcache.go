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

// recordCache keeps recently read records of one kind (the keys under one
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
type recordCache[T any] struct {
	prefix []byte
	// live, when set (a shared engine), says whether the cache may be
	// trusted now and in which listener epoch (kv.LiveEpochs): entries of
	// an earlier epoch are dropped before any is served.
	live func() (epoch uint64, ok bool)

	mu      sync.RWMutex
	gen     uint64
	epoch   uint64
	records map[string]*T // by key suffix
}

func newRecordCache[T any](prefix []byte, live func() (uint64, bool)) *recordCache[T] {
	return &recordCache[T]{prefix: prefix, live: live, records: make(map[string]*T)}
}

// generation is to be read before a read transaction whose records go to
// add.
func (c *recordCache[T]) generation() uint64 {
	if c.live != nil {
		if epoch, ok := c.live(); ok {
			c.newEpoch(epoch) // so that the add after this read is not refused
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// get returns a shallow copy of the cached record (callers may change its
// fields but only read its slices), or nil.
func (c *recordCache[T]) get(id string) *T {
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

// add caches a copy of rec, the record of id read in a transaction that
// began after generation returned gen.
func (c *recordCache[T]) add(gen uint64, id string, rec *T) {
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
	if len(c.records) >= recordCacheSize {
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
func (c *recordCache[T]) drop(keys []string) {
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
func (c *recordCache[T]) newEpoch(epoch uint64) {
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

// caches are the Store's record caches.
type caches struct {
	apps        *recordCache[OAuthApp]         // by client_id
	oauthTokens *recordCache[OAuthAccessToken] // by token digest
	members     *recordCache[Member]           // by member id
}

// The key prefixes of cached records.
var (
	appsPrefix        = oauthAppKey("")
	oauthTokensPrefix = oauthTokenKey("")
	membersPrefix     = memberIDKey("")
	cachedPrefixes    = [][]byte{appsPrefix, oauthTokensPrefix, membersPrefix}
)

// newCaches returns empty caches; live is nil for a store only one process
// uses (Badger), else the engine's kv.LiveEpochs (recordCache.live).
func newCaches(live func() (uint64, bool)) caches {
	return caches{
		apps:        newRecordCache[OAuthApp](appsPrefix, live),
		oauthTokens: newRecordCache[OAuthAccessToken](oauthTokensPrefix, live),
		members:     newRecordCache[Member](membersPrefix, live),
	}
}

// drop forgets the cached records at keys (all of them for nil).
func (c caches) drop(keys []string) {
	c.apps.drop(keys)
	c.oauthTokens.drop(keys)
	c.members.drop(keys)
}

// noteWrite records in tx a write to key that cached records depend on.
func (tx *Tx) noteWrite(key []byte) {
	for _, p := range cachedPrefixes {
		if bytes.HasPrefix(key, p) {
			tx.cachedWritten = append(tx.cachedWritten, string(key))
			return
		}
	}
}

// cachedMember returns the member with id from the cache, or reads it in
// tx; read says it was read, to be added with a generation taken before tx
// began.
func (s *Store) cachedMember(tx *Tx, id string) (m *Member, read bool, err error) {
	if m = s.caches.members.get(id); m != nil {
		return m, false, nil
	}
	m, err = tx.MemberByID(id)
	return m, err == nil, err
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

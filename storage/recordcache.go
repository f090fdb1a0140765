package storage

import (
	"bytes"
	"sync"
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
type recordCache[T any] struct {
	prefix []byte

	mu      sync.RWMutex
	gen     uint64
	records map[string]*T // by key suffix
}

func newRecordCache[T any](prefix []byte) *recordCache[T] {
	return &recordCache[T]{prefix: prefix, records: make(map[string]*T)}
}

// generation is to be read before a read transaction whose records go to
// add.
func (c *recordCache[T]) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// get returns a shallow copy of the cached record (callers may change its
// fields but only read its slices), or nil.
func (c *recordCache[T]) get(id string) *T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if r, ok := c.records[id]; ok {
		cp := *r
		return &cp
	}
	return nil
}

// add caches a copy of rec, the record of id read in a transaction that
// began after generation returned gen.
func (c *recordCache[T]) add(gen uint64, id string, rec *T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
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

func newCaches() caches {
	return caches{
		apps:        newRecordCache[OAuthApp](appsPrefix),
		oauthTokens: newRecordCache[OAuthAccessToken](oauthTokensPrefix),
		members:     newRecordCache[Member](membersPrefix),
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

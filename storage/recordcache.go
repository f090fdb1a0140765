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

func newCaches() caches {
	return caches{
		apps:        newRecordCache[OAuthApp](oauthAppKey("")),
		oauthTokens: newRecordCache[OAuthAccessToken](oauthTokenKey("")),
		members:     newRecordCache[Member](memberIDKey("")),
	}
}

// drop forgets the cached records at keys (all of them for nil).
func (c caches) drop(keys []string) {
	c.apps.drop(keys)
	c.oauthTokens.drop(keys)
	c.members.drop(keys)
}

var cachedPrefixes = [][]byte{oauthAppKey(""), oauthTokenKey(""), memberIDKey("")}

// noteWrite records in tx a write to key that cached records depend on.
func (tx *Tx) noteWrite(key []byte) {
	for _, p := range cachedPrefixes {
		if bytes.HasPrefix(key, p) {
			tx.cachedWritten = append(tx.cachedWritten, string(key))
			return
		}
	}
}

// tokenAndMember returns the record of a bearer token (by id, from cache
// or read by readToken) and, when it names one, its member: the two
// records every API request reads, from the caches when they are there.
func tokenAndMember[T any](s *Store, id string, cache *recordCache[T], readToken func(tx *Tx) (*T, error), memberOf func(*T) string) (*T, *Member, error) {
	tgen, mgen := cache.generation(), s.caches.members.generation()
	t := cache.get(id)
	var m *Member
	if t != nil && memberOf(t) != "" {
		m = s.caches.members.get(memberOf(t))
	}
	if t != nil && (m != nil || memberOf(t) == "") {
		return t, m, nil
	}
	readT, readM := t == nil, false
	err := s.View(func(tx *Tx) error {
		if t == nil {
			var err error
			if t, err = readToken(tx); err != nil {
				return err
			}
		}
		if mid := memberOf(t); mid != "" && m == nil {
			var err error
			m, err = tx.MemberByID(mid)
			readM = err == nil
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if readT {
		cache.add(tgen, id, t)
	}
	if readM {
		s.caches.members.add(mgen, m.ID, m)
	}
	return t, m, nil
}

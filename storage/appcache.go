package storage

import (
	"bytes"
	"sync"
)

// appCacheSize bounds the OAuth applications kept in memory. A site has a
// handful of busy clients; past the bound an arbitrary entry makes room.
const appCacheSize = 1024

// appCache keeps recently read OAuth application records by client_id, so
// that authenticating a client on every token request is a map lookup
// instead of a read transaction and a JSON decode. The records hold the
// client secret's digest, never the secret.
//
// Every write to an application's key goes through Tx.put or Tx.delete,
// which note its client_id; Update drops those entries once the commit is
// done, before it returns, and Restore drops them all. A read that started
// before such a drop must not put the old record back: add takes the
// generation read before the read transaction began and does nothing if a
// drop happened since.
type appCache struct {
	mu   sync.RWMutex
	gen  uint64
	apps map[string]*OAuthApp
}

func newAppCache() *appCache { return &appCache{apps: make(map[string]*OAuthApp)} }

// get returns a copy of the cached record (whose slices it shares: callers
// only read them), and otherwise the generation to pass to add after
// reading the record from the store.
func (c *appCache) get(clientID string) (app *OAuthApp, gen uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if a, ok := c.apps[clientID]; ok {
		cp := *a
		return &cp, 0
	}
	return nil, c.gen
}

// add caches a copy of app, the record of clientID read in a transaction
// that began after get returned gen.
func (c *appCache) add(gen uint64, clientID string, app *OAuthApp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.apps) >= appCacheSize {
		for id := range c.apps {
			delete(c.apps, id)
			break
		}
	}
	cp := *app
	c.apps[clientID] = &cp
}

// drop forgets the given applications (nil: all of them).
func (c *appCache) drop(clientIDs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if clientIDs == nil {
		clear(c.apps)
		return
	}
	for _, id := range clientIDs {
		delete(c.apps, id)
	}
}

var oauthAppPrefix = oauthAppKey("")

// noteWrite records in tx a write to key that cached records depend on.
func (tx *Tx) noteWrite(key []byte) {
	if bytes.HasPrefix(key, oauthAppPrefix) {
		tx.appsWritten = append(tx.appsWritten, string(key[len(oauthAppPrefix):]))
	}
}

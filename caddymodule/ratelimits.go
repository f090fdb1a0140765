package caddymodule

import (
	"sync"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
)

// rateLimits holds one in-memory rate-limit registry per store directory
// for the life of the process: a config reload builds new handlers (and a
// new App) and they find the counts the old ones had, so a reload does not
// reset anyone's limits.
var rateLimits sync.Map // absolute storage_dir → *ratelimit.Registry

// RateLimits is the rate-limit registry of the app's store. With `storage
// postgres` the limits are counted in the database (the store's
// kv.Counters), so each holds across every node of the site and across
// reloads; with Badger (one node) they are counted in this process, as
// fast as a map lookup.
func (a *App) RateLimits() *ratelimit.Registry {
	if a.store != nil && a.store.Engine() == "postgres" {
		return ratelimit.NewSharedRegistry(a.store.Counters(), a.logger.Named("ratelimit"))
	}
	if r, ok := rateLimits.Load(a.path); ok {
		return r.(*ratelimit.Registry)
	}
	r, _ := rateLimits.LoadOrStore(a.path, ratelimit.NewRegistry())
	return r.(*ratelimit.Registry)
}

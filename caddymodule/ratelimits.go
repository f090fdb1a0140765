package caddymodule

import (
	"sync"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
)

// rateLimits holds one rate-limit registry per store directory for the
// life of the process: a config reload builds new handlers (and a new App)
// and they find the counts the old ones had, so a reload does not reset
// anyone's limits.
var rateLimits sync.Map // absolute storage_dir → *ratelimit.Registry

// RateLimits is the rate-limit registry of the app's store.
func (a *App) RateLimits() *ratelimit.Registry {
	if r, ok := rateLimits.Load(a.path); ok {
		return r.(*ratelimit.Registry)
	}
	r, _ := rateLimits.LoadOrStore(a.path, ratelimit.NewRegistry())
	return r.(*ratelimit.Registry)
}

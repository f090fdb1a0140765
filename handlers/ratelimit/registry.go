package ratelimit

import (
	"sync"
	"time"
)

// Registry holds limiters by name so that their counts outlive the handlers
// that use them: the Caddy app keeps one per store, and handlers built
// again on a config reload get the limiters, and the counts, they had. A
// nil *Registry makes fresh limiters (plain use of the handlers, tests).
type Registry struct {
	mu       sync.Mutex
	limiters map[string]*Limiter
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{limiters: map[string]*Limiter{}} }

// Limiter returns the limiter called name with limit events per window:
// the one made before under that name when limit and window are the same,
// else a new one (a changed limit starts counting afresh).
func (r *Registry) Limiter(name string, limit int, window time.Duration) *Limiter {
	if r == nil {
		return New(limit, window)
	}
	fresh := New(limit, window)
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.limiters[name]; ok && l.limit == fresh.limit && l.window == fresh.window {
		return l
	}
	r.limiters[name] = fresh
	return fresh
}

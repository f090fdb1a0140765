package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/internal/ratelimit"
)

// Registry gives the services their limits by name. Counting in memory
// (NewRegistry), it holds the limiters so that their counts outlive the
// handlers that use them: the Caddy app keeps one per store, and handlers
// built again on a config reload get the limiters, and the counts, they
// had. Counting in a shared store (NewSharedRegistry), the counts live in
// the store: every node, and every config of a reload, sees the same. A
// nil *Registry makes fresh in-memory limiters (plain use of the handlers,
// tests).
type Registry struct {
	mu       sync.Mutex
	limiters map[string]*ratelimit.Limiter
	shared   Shared
	log      *zap.Logger
	logged   *logEvery
}

// NewRegistry returns an empty registry of in-memory limiters: the counts
// of one process (one node, as with the embedded Badger store).
func NewRegistry() *Registry { return &Registry{limiters: map[string]*ratelimit.Limiter{}} }

// NewSharedRegistry returns a registry whose limits are counted by shared
// (the store's kv.Counters, storage.Store.Counters) so that they hold
// across every node of the store. log gets, at most every 10 s, a line when
// counts could not be made (each limit's Policy then decides).
func NewSharedRegistry(shared Shared, log *zap.Logger) *Registry {
	if log == nil {
		log = zap.NewNop()
	}
	return &Registry{shared: shared, log: log, logged: new(logEvery)}
}

// Policy is what a limit counted in a shared store decides when the store
// cannot count (the database is away): Result.Err is set either way.
type Policy int

const (
	// FailOpen allows the event: limits on cheap work, or work that needs
	// the store anyway (which then answers 503 itself). A database that is
	// away must not take the site down through its limits.
	FailOpen Policy = iota
	// FailClosed refuses the event, and the service answers 503 with
	// Retry-After (not 429): limits against guessing (passwords, second
	// factors, authorization codes), which must never turn into "allow
	// all" while the counts cannot be read.
	FailClosed
)

// Limit describes one limit of a service.
type Limit struct {
	// Name keeps the counts of one limit apart from the others' (and
	// from a changed limit's: a new N or Window starts counting afresh
	// in memory).
	Name   string
	N      int           // events allowed per Window (at least 1)
	Window time.Duration // the sliding window (a minute when not positive)
	Policy Policy        // when a shared store cannot count
	// Now is an in-memory limiter's clock (tests); nil is time.Now. A
	// shared store counts on its own clock (the database server's).
	Now func() time.Time
}

// Counter returns the counter of l: the registry's limiter of that name,
// limit and window (a new one when the name is new or its limit or window
// changed), or l counted in the shared store.
func (r *Registry) Counter(l Limit) Counter {
	if r == nil {
		return local{ratelimit.New(l.N, l.Window).WithClock(l.Now)}
	}
	if r.shared != nil {
		return newShared(r, l)
	}
	fresh := ratelimit.New(l.N, l.Window)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.limiters[l.Name]; ok && sameLimit(old, fresh) {
		return local{old.WithClock(l.Now)}
	}
	r.limiters[l.Name] = fresh
	return local{fresh.WithClock(l.Now)}
}

// local is a Limiter as a Counter: counts in this process, no error.
type local struct{ l *ratelimit.Limiter }

func (c local) Allow(_ context.Context, key string) Result { return c.l.Allow(key) }
func (c local) Peek(_ context.Context, key string) Result  { return c.l.Peek(key) }
func (c local) Undo(_ context.Context, key string)         { c.l.Undo(key) }
func (c local) Reset(_ context.Context, key string)        { c.l.Reset(key) }

// Shared is the store's shared counting (storage/kv.Counters, as
// storage.Store.Counters gives it): the sliding window of Limiter kept by
// the store under each key, on the store's clock.
type Shared interface {
	CountAllow(ctx context.Context, key string, limit int, window time.Duration) (allowed bool, remaining int, retryAfter time.Duration, err error)
	CountPeek(ctx context.Context, key string, limit int, window time.Duration) (allowed bool, remaining int, retryAfter time.Duration, err error)
	CountUndo(ctx context.Context, key string, window time.Duration) error
	CountReset(ctx context.Context, key string) error
}

// windowName is how a window shows in a shared key.
func windowName(w time.Duration) string { return strconv.FormatInt(w.Milliseconds(), 10) + "ms" }

func sameLimit(a, b *ratelimit.Limiter) bool {
	an, aw := a.Limit()
	bn, bw := b.Limit()
	return an == bn && aw == bw
}

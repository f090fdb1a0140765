package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/internal/ratelimit"
)

// maxSharedKey bounds the keys sent to the shared store: a longer key (a
// username as typed into a form can be long) is counted under its SHA-256.
const maxSharedKey = 256

// shared is a limit counted in the store shared by every node: one round
// trip per call (PostgreSQL: the <prefix>_count function under the key's
// row lock, on the database clock).
type shared struct {
	counts Shared
	reg    *Registry
	name   string
	prefix string // name and window: two limits never share a count
	limit  int
	window time.Duration
	policy Policy
}

func newShared(r *Registry, l Limit) *shared {
	limit, window := l.N, l.Window
	if limit < 1 {
		limit = 1
	}
	if window <= 0 {
		window = time.Minute
	}
	return &shared{
		counts: r.shared, reg: r, name: l.Name,
		prefix: "rl/" + l.Name + "/" + windowName(window) + "/",
		limit:  limit, window: window, policy: l.Policy,
	}
}

// key is the store's key for key: a long key by its digest.
func (s *shared) key(key string) string {
	if len(key) > maxSharedKey {
		sum := sha256.Sum256([]byte(key))
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	return s.prefix + key
}

func (s *shared) Allow(ctx context.Context, key string) Result {
	allowed, remaining, retry, err := s.counts.CountAllow(ctx, s.key(key), s.limit, s.window)
	return s.result(ctx, allowed, remaining, retry, err)
}

func (s *shared) Peek(ctx context.Context, key string) Result {
	allowed, remaining, retry, err := s.counts.CountPeek(ctx, s.key(key), s.limit, s.window)
	return s.result(ctx, allowed, remaining, retry, err)
}

// Undo gives back one event; if the store does not answer, the event
// stays counted (the safe side for every limit).
func (s *shared) Undo(ctx context.Context, key string) {
	if err := s.counts.CountUndo(ctx, s.key(key), s.window); err != nil {
		s.failed(ctx, "undo", err)
	}
}

// Reset forgets key; if the store does not answer, its count stays and
// ages out with the window.
func (s *shared) Reset(ctx context.Context, key string) {
	if err := s.counts.CountReset(ctx, s.key(key)); err != nil {
		s.failed(ctx, "reset", err)
	}
}

func (s *shared) result(ctx context.Context, allowed bool, remaining int, retry time.Duration, err error) Result {
	now := time.Now()
	res := Result{Limit: s.limit, Reset: now.Truncate(s.window).Add(s.window)}
	if err != nil {
		res.Err = err
		if s.policy == FailOpen {
			res.Allowed, res.Remaining = true, s.limit
			s.failed(ctx, "count (allowed: the limit fails open)", err)
		} else {
			res.RetryAfter = time.Second
			s.failed(ctx, "count (refused with 503: the limit fails closed)", err)
		}
		return res
	}
	res.Allowed, res.Remaining = allowed, max(remaining, 0)
	if !allowed {
		res.RetryAfter = ratelimit.RoundUp(retry)
	}
	return res
}

// failed logs, at most every 10 s per registry, that a count could not be
// made (the store logs the cause of its unavailability itself). A
// cancelled request is no failure of the store.
func (s *shared) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	if s.reg.logged.due() {
		s.reg.log.Warn("rate limit "+what, zap.String("limit", s.name), zap.Error(err))
	}
}

// logEvery lets one log line through per interval.
type logEvery struct{ last atomic.Int64 }

const sharedLogEvery = 10 * time.Second

func (l *logEvery) due() bool {
	now := time.Now().UnixNano()
	last := l.last.Load()
	return now-last >= int64(sharedLogEvery) && l.last.CompareAndSwap(last, now)
}

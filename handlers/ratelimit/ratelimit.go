// Package ratelimit is Hearth's one rate limiter: a fixed number of events
// per key in a sliding window, kept in memory. Every service uses it for its
// own keys (client IP, username, token) and answers 429 with Retry-After in
// its own error format.
package ratelimit

import (
	"sync"
	"time"
)

// Limiter allows at most Limit events per key in any Window. It is safe for
// concurrent use. Memory is bounded by the number of keys seen in the last
// window; idle keys are dropped.
type Limiter struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	keys    map[string]*bucket
	lastGC  time.Time
	maxKeys int
}

// bucket is a sliding-window approximation: the count of the current fixed
// window plus the previous window's count weighted by how much of it still
// overlaps the sliding window.
type bucket struct {
	start      time.Time // start of the current fixed window
	prev, curr int
}

// New returns a limiter of limit events per window.
func New(limit int, window time.Duration) *Limiter {
	if limit < 1 {
		limit = 1
	}
	if window <= 0 {
		window = time.Minute
	}
	return &Limiter{limit: limit, window: window, now: time.Now, keys: make(map[string]*bucket), maxKeys: 1 << 20}
}

// WithClock replaces the limiter's clock (tests).
func (l *Limiter) WithClock(now func() time.Time) *Limiter { l.now = now; return l }

// Result is the outcome of Allow.
type Result struct {
	Allowed    bool
	Limit      int
	Remaining  int
	RetryAfter time.Duration // when not allowed: how long until an event would be allowed
	Reset      time.Time     // when the current fixed window ends
}

// Allow records one event for key if it is within the limit.
func (l *Limiter) Allow(key string) Result {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gc(now)
	b := l.keys[key]
	if b == nil {
		b = &bucket{start: now.Truncate(l.window)}
		l.keys[key] = b
	}
	b.roll(now, l.window)
	elapsed := now.Sub(b.start)
	weight := 1 - float64(elapsed)/float64(l.window)
	used := float64(b.prev)*weight + float64(b.curr)
	res := Result{Limit: l.limit, Reset: b.start.Add(l.window)}
	if used+1 > float64(l.limit) {
		res.RetryAfter = l.retryAfter(b, now)
		return res
	}
	b.curr++
	res.Allowed = true
	res.Remaining = int(float64(l.limit) - used - 1)
	if res.Remaining < 0 {
		res.Remaining = 0
	}
	return res
}

// Peek reports whether an event for key would be allowed, without recording it.
func (l *Limiter) Peek(key string) Result {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.keys[key]
	res := Result{Allowed: true, Limit: l.limit, Remaining: l.limit, Reset: now.Truncate(l.window).Add(l.window)}
	if b == nil {
		return res
	}
	b.roll(now, l.window)
	weight := 1 - float64(now.Sub(b.start))/float64(l.window)
	used := float64(b.prev)*weight + float64(b.curr)
	res.Reset = b.start.Add(l.window)
	if used+1 > float64(l.limit) {
		res.Allowed, res.Remaining, res.RetryAfter = false, 0, l.retryAfter(b, now)
		return res
	}
	res.Remaining = int(float64(l.limit) - used)
	return res
}

// Undo gives back one event that Allow recorded for key, for an attempt
// that turned out not to count (a sign-in that succeeded). Reserving with
// Allow before the work and undoing after it, rather than checking with Peek
// and recording after, keeps concurrent attempts within the limit.
func (l *Limiter) Undo(key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.keys[key]
	if b == nil {
		return
	}
	b.roll(now, l.window)
	switch {
	case b.curr > 0:
		b.curr--
	case b.prev > 0:
		b.prev--
	}
}

// RetryAfterSeconds is the Retry-After value for a wait: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(wait time.Duration) int {
	return max(1, int((wait+time.Second-1)/time.Second))
}

// Reset forgets key, e.g. after a successful sign-in.
func (l *Limiter) Reset(key string) {
	l.mu.Lock()
	delete(l.keys, key)
	l.mu.Unlock()
}

func (b *bucket) roll(now time.Time, window time.Duration) {
	start := now.Truncate(window)
	switch {
	case start.Equal(b.start):
	case start.Sub(b.start) == window:
		b.prev, b.curr, b.start = b.curr, 0, start
	default:
		b.prev, b.curr, b.start = 0, 0, start
	}
}

// retryAfter finds when the weighted count drops enough for one more event:
// within the current window the previous window's weight falls linearly; if
// that is not enough, the next window starts with curr as its prev.
func (l *Limiter) retryAfter(b *bucket, now time.Time) time.Duration {
	elapsed := now.Sub(b.start)
	free := float64(l.limit - 1 - b.curr)
	if b.prev > 0 && free >= 0 {
		// prev*(1 - t/window) <= free  =>  t >= window*(1 - free/prev)
		t := time.Duration(float64(l.window) * (1 - free/float64(b.prev)))
		if t > elapsed {
			return roundUp(t - elapsed)
		}
	}
	end := l.window - elapsed
	// In the next window curr becomes prev; wait until its weight allows one.
	if b.curr > 0 {
		f := float64(l.limit - 1)
		t := time.Duration(float64(l.window) * (1 - f/float64(b.curr)))
		if t < 0 {
			t = 0
		}
		return roundUp(end + t)
	}
	return roundUp(end)
}

func roundUp(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// gc drops keys idle for two windows, at most once per window.
func (l *Limiter) gc(now time.Time) {
	if now.Sub(l.lastGC) < l.window && len(l.keys) < l.maxKeys {
		return
	}
	l.lastGC = now
	for k, b := range l.keys {
		if now.Sub(b.start) >= 2*l.window {
			delete(l.keys, k)
		}
	}
}

// Package ratelimit is the in-memory sliding-window limiter (Limiter): a
// fixed number of events per key in any window, in a bounded structure. It
// sits under both layers: handlers/ratelimit builds the services' limits on
// it, and storage/kv/badgerkv counts a single node's shared limits with it
// (kv.Counters).
package ratelimit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// DefaultMaxKeys bounds the keys one Limiter remembers.
const DefaultMaxKeys = 1 << 20

// numShards splits a limiter's keys so that concurrent calls rarely wait on
// the same lock.
const numShards = 64

// Limiter allows at most Limit events per key in any Window. It is safe for
// concurrent use. Every call costs O(1): the key's shard is locked and its
// bucket found in a hash map. Memory is bounded: at most DefaultMaxKeys keys
// are kept, and when a shard is full the key used least recently is
// forgotten (so an attacker rotating keys can at worst reset the counts of
// keys idle longer than the newest 1 M, not grow memory).
//
// Keys are counted as they are given: a limit per client address counts
// handlers/ratelimit's AddressKey(address), which puts an IPv6 client's
// whole /64 under one key.
type Limiter struct {
	limit  int
	window time.Duration
	now    atomic.Pointer[func() time.Time]
	seed   maphash.Seed
	shards [numShards]shard
}

type shard struct {
	mu   sync.Mutex
	keys *simplelru.LRU[string, *bucket]
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
	return NewBounded(limit, window, DefaultMaxKeys)
}

// NewBounded is New remembering at most maxKeys keys.
func NewBounded(limit int, window time.Duration, maxKeys int) *Limiter {
	if limit < 1 {
		limit = 1
	}
	if window <= 0 {
		window = time.Minute
	}
	l := &Limiter{limit: limit, window: window, seed: maphash.MakeSeed()}
	now := time.Now
	l.now.Store(&now)
	per := max(1, maxKeys/numShards)
	for i := range l.shards {
		l.shards[i].keys, _ = simplelru.NewLRU[string, *bucket](per, nil)
	}
	return l
}

// WithClock replaces the limiter's clock (tests); nil keeps it.
func (l *Limiter) WithClock(now func() time.Time) *Limiter {
	if now != nil {
		l.now.Store(&now)
	}
	return l
}

func (l *Limiter) clock() time.Time { return (*l.now.Load())() }

// shardFor returns key's shard, locked, and the key.
func (l *Limiter) shardFor(key string) (*shard, string) {
	sh := &l.shards[maphash.String(l.seed, key)%numShards]
	sh.mu.Lock()
	return sh, key
}

// Limit is the limiter's number of events per window, and the window.
func (l *Limiter) Limit() (int, time.Duration) { return l.limit, l.window }

// Len is the number of keys remembered (tests, metrics).
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += sh.keys.Len()
		sh.mu.Unlock()
	}
	return n
}

// Result is the outcome of Allow.
type Result struct {
	Allowed    bool
	Limit      int
	Remaining  int
	RetryAfter time.Duration // when not allowed: how long until an event would be allowed
	Reset      time.Time     // when the current fixed window ends
	// Err is why the event could not be counted (handlers/ratelimit's
	// Counter on a shared store that did not answer); Allowed is then the
	// limit's Policy.
	Err error
}

// Allow records one event for key if it is within the limit.
func (l *Limiter) Allow(key string) Result {
	now := l.clock()
	sh, key := l.shardFor(key)
	defer sh.mu.Unlock()
	b, ok := sh.keys.Get(key)
	if !ok {
		b = &bucket{start: now.Truncate(l.window)}
		sh.keys.Add(key, b)
	}
	used := b.used(now, l.window)
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
	now := l.clock()
	sh, key := l.shardFor(key)
	defer sh.mu.Unlock()
	b, ok := sh.keys.Peek(key)
	res := Result{Allowed: true, Limit: l.limit, Remaining: l.limit, Reset: now.Truncate(l.window).Add(l.window)}
	if !ok {
		return res
	}
	used := b.used(now, l.window)
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
	now := l.clock()
	sh, key := l.shardFor(key)
	defer sh.mu.Unlock()
	b, ok := sh.keys.Peek(key)
	if !ok {
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

// Reset forgets key, e.g. after a successful sign-in.
func (l *Limiter) Reset(key string) {
	sh, key := l.shardFor(key)
	sh.keys.Remove(key)
	sh.mu.Unlock()
}

// used rolls the bucket to now and returns its weighted count: the events
// of the current window plus the previous window's, weighted by how much
// of it the sliding window still covers.
func (b *bucket) used(now time.Time, window time.Duration) float64 {
	b.roll(now, window)
	weight := 1 - float64(now.Sub(b.start))/float64(window)
	return float64(b.prev)*weight + float64(b.curr)
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
			return RoundUp(t - elapsed)
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
		return RoundUp(end + t)
	}
	return RoundUp(end)
}

// RoundUp is a retry wait as the limiter answers it: whole seconds,
// rounded up, at least one.
func RoundUp(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

package ratelimit_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/internal/ratelimit"
)

// clock is a test clock the limiter reads.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newLimiter(limit int, window time.Duration) (*ratelimit.Limiter, *clock) {
	c := &clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	return ratelimit.New(limit, window).WithClock(c.now), c
}

func TestAllowsUpToTheLimitThenRefuses(t *testing.T) {
	l, _ := newLimiter(3, time.Minute)
	for i := 0; i < 3; i++ {
		if r := l.Allow("ip:1"); !r.Allowed || r.Remaining != 2-i || r.Limit != 3 {
			t.Fatalf("event %d: %+v", i+1, r)
		}
	}
	r := l.Allow("ip:1")
	if r.Allowed || r.Remaining != 0 || r.RetryAfter < time.Second || r.RetryAfter > 2*time.Minute {
		t.Fatalf("fourth event: %+v", r)
	}
	if r := l.Allow("ip:2"); !r.Allowed {
		t.Fatalf("another key is limited too: %+v", r)
	}
}

func TestWindowSlides(t *testing.T) {
	l, c := newLimiter(10, time.Minute)
	for i := 0; i < 10; i++ {
		l.Allow("k")
	}
	// Half a window into the next one, half of the previous window's
	// events still count: 5 more are allowed, not 10.
	c.t = c.t.Add(90 * time.Second)
	allowed := 0
	for i := 0; i < 10; i++ {
		if l.Allow("k").Allowed {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("%d allowed half a window later, want 5", allowed)
	}
	// Two windows later everything has expired.
	c.t = c.t.Add(2 * time.Minute)
	if r := l.Allow("k"); !r.Allowed || r.Remaining != 9 {
		t.Fatalf("after two windows: %+v", r)
	}
}

func TestRetryAfterIsWhenTheNextEventIsAllowed(t *testing.T) {
	l, c := newLimiter(2, time.Minute)
	l.Allow("k")
	l.Allow("k")
	r := l.Allow("k")
	if r.Allowed {
		t.Fatal("third event allowed")
	}
	c.t = c.t.Add(r.RetryAfter)
	if r := l.Allow("k"); !r.Allowed {
		t.Fatalf("refused again after waiting Retry-After: %+v", r)
	}
}

func TestPeekRecordsNothingAndResetForgets(t *testing.T) {
	l, _ := newLimiter(1, time.Minute)
	for i := 0; i < 3; i++ {
		if r := l.Peek("k"); !r.Allowed {
			t.Fatalf("peek %d: %+v", i, r)
		}
	}
	l.Allow("k")
	if r := l.Peek("k"); r.Allowed || r.RetryAfter <= 0 {
		t.Fatalf("peek after the limit: %+v", r)
	}
	l.Reset("k")
	if r := l.Allow("k"); !r.Allowed {
		t.Fatalf("after Reset: %+v", r)
	}
}

// Undo gives back one event: the next Allow passes again; undoing a key
// with nothing recorded changes nothing.
func TestUndoGivesBackOneEvent(t *testing.T) {
	l := ratelimit.New(2, time.Minute)
	l.Undo("a") // nothing recorded: no credit
	for i := 0; i < 2; i++ {
		if !l.Allow("a").Allowed {
			t.Fatalf("event %d refused", i+1)
		}
	}
	if l.Allow("a").Allowed {
		t.Fatal("third event allowed with a limit of 2")
	}
	l.Undo("a")
	if !l.Allow("a").Allowed {
		t.Fatal("event after Undo refused")
	}
	if l.Allow("a").Allowed {
		t.Fatal("Undo gave back more than one event")
	}
}

// TestMemoryIsBounded: keys past the bound evict the least recently used
// ones; the count of a key in use survives a flood of new keys.
func TestMemoryIsBounded(t *testing.T) {
	const maxKeys = 64 * 16
	c := &clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	l := ratelimit.NewBounded(2, time.Minute, maxKeys).WithClock(c.now)
	l.Allow("victim")
	l.Allow("victim")
	for i := range 50 * maxKeys {
		l.Allow("flood-" + strconv.Itoa(i))
		if i%(maxKeys/64) == 0 {
			// the victim keeps trying, so it stays among the recently used
			if r := l.Allow("victim"); r.Allowed {
				t.Fatalf("after %d flood keys the victim's count was forgotten: %+v", i, r)
			}
		}
	}
	if n := l.Len(); n > maxKeys {
		t.Fatalf("%d keys kept, bound %d", n, maxKeys)
	}
}

// BenchmarkAllow1MKeys: Allow with 1 M distinct keys remembered (the old
// limiter scanned every key under its mutex once the map held 1 M: 276 ms a
// call). Half the calls are for known keys, half for new ones, which evict.
func BenchmarkAllow1MKeys(b *testing.B) {
	l := ratelimit.New(10, time.Minute)
	const n = 1 << 20
	keys := make([]string, 2*n)
	for i := range keys {
		keys[i] = "198.51." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255)
	}
	for _, k := range keys[:n] {
		l.Allow(k)
	}
	if got := l.Len(); got < n*9/10 || got > n {
		b.Fatalf("%d keys after the fill", got)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		l.Allow(keys[i%len(keys)])
		i += 7919 // a prime stride: known and new keys alternate
	}
}

// BenchmarkAllow1MKeysParallel is the same under concurrent callers.
func BenchmarkAllow1MKeysParallel(b *testing.B) {
	l := ratelimit.New(10, time.Minute)
	const n = 1 << 20
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "2001:db8:" + strconv.FormatInt(int64(i), 16) + "::1"
		l.Allow(keys[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.Allow(keys[i%n])
			i += 7919
		}
	})
}

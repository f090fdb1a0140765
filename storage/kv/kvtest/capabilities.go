package kvtest

// The optional capabilities several nodes share: counters, leases and id
// slots.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// capability is what the engines a and b (a alone when b is nil) offer
// as C, the capability named what; the test is skipped when a offers none.
func capability[C any](t *testing.T, a, b kv.Engine, what string) (C, C) {
	t.Helper()
	ca, ok := a.(C)
	if !ok {
		t.Skip("engine offers no " + what)
	}
	cb := ca
	if b != nil {
		cb = b.(C)
	}
	return ca, cb
}

func testCounters(t *testing.T, a, b kv.Engine) {
	ca, cb := capability[kv.Counters](t, a, b, "kv.Counters")
	const limit = 6
	w := time.Hour
	key := fmt.Sprintf("signin:alice:%d", time.Now().UnixNano())
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		wg.Go(func() {
			for range 5 {
				ok, _, retry, err := c.CountAllow(bg, key, limit, w)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					allowed.Add(1)
				} else if retry <= 0 {
					t.Error("refused without a Retry-After")
				}
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != limit {
		t.Fatalf("%d of 20 attempts allowed, want exactly %d", n, limit)
	}
	if ok, rem, _, err := cb.CountPeek(bg, key, limit, w); err != nil || ok || rem != 0 {
		t.Fatalf("Peek at the limit: %v %d %v", ok, rem, err)
	}
	if err := ca.CountUndo(bg, key, w); err != nil {
		t.Fatal(err)
	}
	if ok, _, _, err := cb.CountPeek(bg, key, limit, w); err != nil || !ok {
		t.Fatalf("Peek after Undo: %v %v", ok, err)
	}
	if ok, _, _, err := cb.CountAllow(bg, key, limit, w); err != nil || !ok {
		t.Fatalf("Allow after Undo: %v %v", ok, err)
	}
	if ok, _, _, err := ca.CountAllow(bg, key, limit, w); err != nil || ok {
		t.Fatalf("Allow beyond the limit again: %v %v", ok, err)
	}
	if err := cb.CountReset(bg, key); err != nil {
		t.Fatal(err)
	}
	if ok, rem, _, err := ca.CountAllow(bg, key, limit, w); err != nil || !ok || rem != limit-1 {
		t.Fatalf("Allow after Reset: %v %d %v", ok, rem, err)
	}
}

// testLeases: two contenders for one lease never run at once; when the
// holder stops, the other takes over.
func testLeases(t *testing.T, a, b kv.Engine) {
	la, lb := capability[kv.Leases](t, a, b, "kv.Leases")
	name := fmt.Sprintf("test:%d", time.Now().UnixNano())
	var inside atomic.Int32
	var overlap atomic.Bool
	started := make(chan string, 10)
	ctxA, cancelA := context.WithCancel(bg)
	ctxB, cancelB := context.WithCancel(bg)
	defer cancelB()
	run := func(who string) func(ctx context.Context) {
		return func(ctx context.Context) {
			if inside.Add(1) > 1 {
				overlap.Store(true)
			}
			started <- who
			<-ctx.Done()
			inside.Add(-1)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { la.Lead(ctxA, name, run("a")) })
	first := <-started
	if first != "a" {
		t.Fatalf("first holder %q", first)
	}
	wg.Go(func() { lb.Lead(ctxB, name, run("b")) })
	cancelA() // a steps down; b must take over
	select {
	case who := <-started:
		if who != "b" {
			t.Fatalf("next holder %q, want b", who)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("b never took the lease over")
	}
	cancelB()
	wg.Wait()
	if overlap.Load() {
		t.Fatal("two holders ran at once")
	}
}

func testIDSlots(t *testing.T, a, b kv.Engine) {
	sa, sb := capability[kv.IDSlots](t, a, b, "kv.IDSlots")
	x, err := sa.IDSlot(bg)
	if err != nil {
		t.Fatal(err)
	}
	y, err := sb.IDSlot(bg)
	if err != nil {
		t.Fatal(err)
	}
	if x > kv.MaxIDSlot || y > kv.MaxIDSlot {
		t.Fatalf("slots %d, %d out of range", x, y)
	}
	if a != b && x == y {
		t.Fatalf("two engines got the same id slot %d", x)
	}
	if again, err := sa.IDSlot(bg); err != nil || again != x {
		t.Fatalf("slot changed: %d then %d (%v)", x, again, err)
	}
	if held, ok := sa.HeldIDSlot(); !ok || held != x {
		t.Fatalf("HeldIDSlot = %d, %v after IDSlot gave %d", held, ok, x)
	}
}

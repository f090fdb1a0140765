package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// TestSharedRegistryCountsInTheStore: two registries on one store (the
// handlers of two nodes, or of two configs across a reload) share every
// count; limits of other names or windows count apart; an IPv6 client is
// counted per /64 and a long key by its digest, apart from others;
// reserve/undo/reset (the sign-in form's pattern) work on the shared counts.
//
// The store is Badger's, whose kv.Counters count in the process; the same
// calls go to PostgreSQL's with `storage postgres`, which the two-node
// test in interop/cluster runs.
func TestSharedRegistryCountsInTheStore(t *testing.T) {
	ctx := context.Background()
	st := storagetest.Open(t)
	a := ratelimit.NewSharedRegistry(st.Counters(), nil)
	b := ratelimit.NewSharedRegistry(st.Counters(), nil)
	lim := ratelimit.Limit{Name: "account.failures.username", N: 3, Window: time.Minute, Policy: ratelimit.FailClosed}
	onA, onB := a.Counter(lim), b.Counter(lim)
	for i, c := range []ratelimit.Counter{onA, onB, onA} {
		if r := c.Allow(ctx, "user:alice"); !r.Allowed || r.Err != nil || r.Limit != 3 || r.Remaining != 2-i {
			t.Fatalf("attempt %d: %+v", i+1, r)
		}
	}
	r := onB.Allow(ctx, "user:alice")
	if r.Allowed || r.Err != nil || r.RetryAfter < time.Second {
		t.Fatalf("4th attempt on the other registry: %+v; want refused with a Retry-After", r)
	}
	if p := onA.Peek(ctx, "user:alice"); p.Allowed {
		t.Fatalf("Peek after the limit: %+v", p)
	}
	// Other names and windows count apart.
	if r := b.Counter(ratelimit.Limit{Name: "account.failures.ip", N: 3, Window: time.Minute}).Allow(ctx, "user:alice"); !r.Allowed {
		t.Fatalf("another limit's name shares the count: %+v", r)
	}
	if r := b.Counter(ratelimit.Limit{Name: lim.Name, N: 3, Window: time.Hour}).Allow(ctx, "user:alice"); !r.Allowed {
		t.Fatalf("another window shares the count: %+v", r)
	}
	// Undo gives one back (on any node); Reset forgets.
	onA.Undo(ctx, "user:alice")
	if r := onB.Allow(ctx, "user:alice"); !r.Allowed {
		t.Fatalf("after Undo on the other node: %+v", r)
	}
	if r := onA.Allow(ctx, "user:alice"); r.Allowed {
		t.Fatalf("Undo gave back more than one: %+v", r)
	}
	onB.Reset(ctx, "user:alice")
	if r := onA.Allow(ctx, "user:alice"); !r.Allowed || r.Remaining != 2 {
		t.Fatalf("after Reset: %+v", r)
	}

	// IPv6 per /64; a long key by its digest, apart from another long key.
	ip := a.Counter(ratelimit.Limit{Name: "oauth.token", N: 2, Window: time.Minute})
	ip.Allow(ctx, ratelimit.AddressKey("2001:db8:1:2::1"))
	ip.Allow(ctx, ratelimit.AddressKey("2001:db8:1:2::2"))
	if r := b.Counter(ratelimit.Limit{Name: "oauth.token", N: 2, Window: time.Minute}).Allow(ctx, ratelimit.AddressKey("2001:db8:1:2:ffff::3")); r.Allowed {
		t.Fatalf("a third address of the /64 allowed: %+v", r)
	}
	long1, long2 := "user:"+strings.Repeat("x", 5000), "user:"+strings.Repeat("x", 4999)+"y"
	long := a.Counter(ratelimit.Limit{Name: "long", N: 1, Window: time.Minute, Policy: ratelimit.FailClosed})
	if r := long.Allow(ctx, long1); !r.Allowed || r.Err != nil {
		t.Fatalf("a 5000-byte key: %+v", r)
	}
	if r := long.Allow(ctx, long1); r.Allowed || r.Err != nil {
		t.Fatalf("the same long key again: %+v", r)
	}
	if r := long.Allow(ctx, long2); !r.Allowed || r.Err != nil {
		t.Fatalf("another long key shares the count: %+v", r)
	}
}

// TestSharedPolicyWhenTheStoreCannotCount: when the store cannot count (here
// closed; with PostgreSQL, the database away), a FailClosed limit refuses
// with an error the services answer 503 (storage.Unavailable), never 429
// and never "allowed"; a FailOpen limit allows, with the error set.
func TestSharedPolicyWhenTheStoreCannotCount(t *testing.T) {
	ctx := context.Background()
	st := storagetest.Open(t)
	reg := ratelimit.NewSharedRegistry(st.Counters(), nil)
	closed := reg.Counter(ratelimit.Limit{Name: "guesses", N: 10, Window: time.Minute, Policy: ratelimit.FailClosed})
	open := reg.Counter(ratelimit.Limit{Name: "cheap", N: 10, Window: time.Minute})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r := closed.Allow(ctx, "user:alice")
	if r.Allowed || r.Err == nil {
		t.Fatalf("FailClosed with the store closed: %+v; want refused with Err", r)
	}
	if status, _, ok := storage.Unavailable(r.Err); !ok || status != http.StatusServiceUnavailable {
		t.Fatalf("FailClosed's error %v: status %d, unavailable %v; want 503", r.Err, status, ok)
	}
	if !errors.Is(r.Err, storage.ErrClosed) {
		t.Fatalf("error %v, want storage.ErrClosed", r.Err)
	}
	r = open.Allow(ctx, "ip:192.0.2.1")
	if !r.Allowed || r.Err == nil {
		t.Fatalf("FailOpen with the store closed: %+v; want allowed with Err", r)
	}
	// Undo and Reset with the store closed change nothing and do not panic.
	closed.Undo(ctx, "user:alice")
	closed.Reset(ctx, "user:alice")
}

// TestSharedCountsOnlyWhenOpen: a store prepared but not open yet (Caddy's
// Provision) answers ErrClosed, not a nil-pointer panic.
func TestSharedCountsOnlyWhenOpen(t *testing.T) {
	st := storage.Prepare(t.TempDir(), storage.Options{})
	r := ratelimit.NewSharedRegistry(st.Counters(), nil).
		Counter(ratelimit.Limit{Name: "x", N: 1, Window: time.Minute, Policy: ratelimit.FailClosed}).
		Allow(context.Background(), "k")
	if r.Allowed || !errors.Is(r.Err, storage.ErrClosed) {
		t.Fatalf("before Open: %+v", r)
	}
}

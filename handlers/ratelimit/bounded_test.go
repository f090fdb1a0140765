package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	limiter "github.com/hearthkit/caddy-hearth/internal/ratelimit"
)

// TestAddressKeyPerSlash64: AddressKey puts every address of one IPv6 /64
// under one key, so rotating addresses inside it does not escape a limit;
// another /64, and IPv4 addresses (mapped or not), are counted apart.
func TestAddressKeyPerSlash64(t *testing.T) {
	l := limiter.New(3, time.Minute)
	for i := 1; i <= 3; i++ {
		if r := l.Allow(ratelimit.AddressKey(fmt.Sprintf("2001:db8:1:2::%x", i))); !r.Allowed {
			t.Fatalf("address %d refused: %+v", i, r)
		}
	}
	for _, a := range []string{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::99", "2001:db8:1:2:a:b:c:d", "[2001:db8:1:2::7]", "fe80::1%eth0"} {
		if a == "fe80::1%eth0" {
			if ratelimit.AddressKey(a) != ratelimit.AddressKey("fe80::ffff") {
				t.Errorf("a zone splits the /64: %s", ratelimit.AddressKey(a))
			}
			continue
		}
		if r := l.Allow(ratelimit.AddressKey(a)); r.Allowed {
			t.Errorf("%s in the same /64 allowed past the limit", a)
		}
	}
	if r := l.Allow(ratelimit.AddressKey("2001:db8:1:3::1")); !r.Allowed {
		t.Errorf("another /64 limited: %+v", r)
	}
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "::ffff:192.0.2.5"} {
		if r := l.Allow(ratelimit.AddressKey(a)); !r.Allowed {
			t.Errorf("IPv4 %s limited with its neighbours", a)
		}
	}
	if ratelimit.AddressKey("::ffff:192.0.2.9") != ratelimit.AddressKey("192.0.2.9") {
		t.Errorf("an IPv4-mapped address counts apart from its IPv4 address")
	}
	// Undo, Reset and Peek see the same /64.
	l.Reset(ratelimit.AddressKey("2001:db8:1:2::1234"))
	if r := l.Peek(ratelimit.AddressKey("2001:db8:1:2::1")); !r.Allowed || r.Remaining != 3 {
		t.Errorf("after Reset of another address in the /64: %+v", r)
	}
	// Other keys are counted as given.
	for _, k := range []string{"user:alice", "2001:db8::1", "member:abc"} {
		l.Allow(k)
		if r := l.Peek(k); r.Remaining != 2 {
			t.Errorf("%q not counted as itself: %+v", k, r)
		}
	}
}

// TestRegistryKeepsCountsAcrossRebuilds: a handler built again (Caddy
// reload) with the same registry gets the same counts.
func TestRegistryKeepsCountsAcrossRebuilds(t *testing.T) {
	ctx := context.Background()
	reg := ratelimit.NewRegistry()
	token := ratelimit.Limit{Name: "oauth.token", N: 2, Window: time.Minute}
	first := reg.Counter(token)
	first.Allow(ctx, "203.0.113.9")
	first.Allow(ctx, "203.0.113.9")
	second := reg.Counter(token)
	if r := second.Allow(ctx, "203.0.113.9"); r.Allowed || r.Err != nil {
		t.Fatalf("counts lost when the limiter was asked for again: %+v", r)
	}
	if r := reg.Counter(ratelimit.Limit{Name: "oauth.register", N: 2, Window: time.Minute}).Allow(ctx, "203.0.113.9"); !r.Allowed {
		t.Fatalf("another name shares counts: %+v", r)
	}
	if r := reg.Counter(ratelimit.Limit{Name: "oauth.token", N: 5, Window: time.Minute}).Allow(ctx, "203.0.113.9"); !r.Allowed {
		t.Fatalf("a changed limit kept the old counts: %+v", r)
	}
	var none *ratelimit.Registry
	if r := none.Counter(ratelimit.Limit{Name: "x", N: 1, Window: time.Minute}).Allow(ctx, "k"); !r.Allowed {
		t.Fatalf("nil registry: %+v", r)
	}
}

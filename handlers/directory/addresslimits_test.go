package directory

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestPerAddressLimitsCountAnIPv6Slash64: registrations and event posts
// per client address count every address of one IPv6 /64 together
// (rotating addresses within it does not escape them); another /64 has its
// own count.
func TestPerAddressLimitsCountAnIPv6Slash64(t *testing.T) {
	var addr atomic.Value
	clientIP := func(*http.Request) string { return addr.Load().(string) }
	t.Run("registrations", func(t *testing.T) {
		e := newEnv(t, Options{RegisterLimitIP: Limit{2, time.Hour}, ClientIP: clientIP})
		for i := range 2 {
			addr.Store(fmt.Sprintf("2001:db8:1:2::%x", i+1))
			e.mustRegister(regEvent(t, newAgent(t), e.now(), "ok"))
		}
		addr.Store("2001:db8:1:2:ffff::1")
		if r := e.register(regEvent(t, newAgent(t), e.now(), "third")); r.status != http.StatusTooManyRequests {
			t.Errorf("third registration from the /64: %d %s", r.status, r.body)
		}
		addr.Store("2001:db8:1:3::1")
		e.mustRegister(regEvent(t, newAgent(t), e.now(), "other"))
	})
	t.Run("events", func(t *testing.T) {
		e := newEnv(t, Options{EventsLimitIP: Limit{1, time.Minute}, ClientIP: clientIP})
		addr.Store("2001:db8:1:2::1")
		e.post()
		addr.Store("2001:db8:1:2::2")
		if r := e.do(http.MethodPost, EventsPath, []byte(`[]`)); r.status != http.StatusTooManyRequests {
			t.Errorf("second post from the /64: %d %s", r.status, r.body)
		}
		addr.Store("2001:db8:1:3::1")
		if r := e.do(http.MethodPost, EventsPath, []byte(`[]`)); r.status != http.StatusOK {
			t.Errorf("a post from another /64: %d %s", r.status, r.body)
		}
	})
}

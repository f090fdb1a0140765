package graphql_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestNewsletterPostsCountAnIPv6Slash64: the inbound URL's per-address
// limit counts every address of one IPv6 /64 together (rotating addresses
// within it does not escape it); another /64 has its own count. (Guessed
// tokens: TestBadTokensCountPerClientAddress.)
func TestNewsletterPostsCountAnIPv6Slash64(t *testing.T) {
	var addr atomic.Value
	e := newEnv(t, options{InboundRateLimit: 2, ClientIP: func(*http.Request) string { return addr.Load().(string) }})
	url := inboundURL(t, e)
	for i := range 2 {
		addr.Store(fmt.Sprintf("2001:db8:1:2::%x", i+1))
		if status, body := postInbound(t, e, url, newsletterMessage); status != http.StatusCreated {
			t.Fatalf("message %d: %d %s", i+1, status, body)
		}
	}
	addr.Store("2001:db8:1:2:ffff::1")
	if status, _ := postInbound(t, e, url, newsletterMessage); status != http.StatusTooManyRequests {
		t.Fatalf("a third message from the /64: %d, want 429", status)
	}
	addr.Store("2001:db8:1:3::1")
	if status, body := postInbound(t, e, url, newsletterMessage); status != http.StatusCreated {
		t.Fatalf("a message from another /64: %d %s", status, body)
	}
}

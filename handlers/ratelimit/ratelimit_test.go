package ratelimit_test

import (
	"net/http/httptest"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
)

func TestRemoteIP(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	for addr, want := range map[string]string{
		"192.0.2.1:1234": "192.0.2.1",
		"[::1]:80":       "::1",
		"no-port":        "no-port",
	} {
		r.RemoteAddr = addr
		if got := ratelimit.RemoteIP(r); got != want {
			t.Errorf("RemoteIP(%q) = %q, want %q", addr, got, want)
		}
	}
}

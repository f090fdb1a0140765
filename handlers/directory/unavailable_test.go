package directory

import (
	"net/http"
	"testing"
)

// A store that refuses for now (closed by a reload: storage.ErrClosed)
// answers registration and event posts with the directory's plain JSON
// error, 503 and Retry-After, never a 500.
func TestStoreRefusalsAre503WithRetryAfter(t *testing.T) {
	e, a := envWithAgent(t, Options{}, "Alpha")
	e.store.Close()
	b := newAgent(t)
	for _, c := range []struct {
		what string
		r    response
	}{
		{"registration", e.register(regEvent(t, b, e.now(), "Beta"))},
		{"event post", e.do(http.MethodPost, EventsPath, mustJSON(t, []any{note(t, a, e.now(), "hello")}))},
	} {
		if c.r.status != http.StatusServiceUnavailable {
			t.Fatalf("%s on a closed store: HTTP %d %s, want 503", c.what, c.r.status, c.r.body)
		}
		if c.r.header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After", c.what)
		}
		if msg := c.r.errorMessage(t); msg == "" {
			t.Fatalf("%s: no error message", c.what)
		}
	}
}

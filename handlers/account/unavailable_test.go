package account_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

// A store that refuses for now (closed by a reload: storage.ErrClosed)
// gets the plain error page with 503 and Retry-After on the sign-in form,
// never a 500: the member is told to try again, and no session is given.
func TestSignInOnRefusingStoreIs503WithRetryAfter(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	f.store.Close()
	c := f.browser()
	r := f.signIn(c, "alice", password, "/settings/api_tokens")
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("sign-in on a closed store: HTTP %d, want 503\n%s", r.StatusCode, r.body)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if !strings.Contains(r.body, "Try again") {
		t.Fatalf("the page does not say to try again:\n%s", r.body)
	}
	if loc := r.Header.Get("Location"); loc != "" {
		t.Fatalf("redirected to %q as if signed in", loc)
	}
}

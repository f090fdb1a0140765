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

// A signed-in member whose store refuses for now (here: closed, as after a
// reload) gets 503 with Retry-After on a settings page, not a redirect to
// sign-in as if signed out.
func TestSettingsOnRefusingStoreIs503NotSignIn(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	c := f.browser()
	if r := f.signIn(c, "alice", password, "/settings"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: HTTP %d\n%s", r.StatusCode, r.body)
	}
	f.store.Close()
	r := f.get(c, "/settings")
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("settings on a closed store: HTTP %d, Retry-After %q, Location %q, want 503 with Retry-After",
			r.StatusCode, r.Header.Get("Retry-After"), r.Header.Get("Location"))
	}
}

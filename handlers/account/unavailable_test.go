package account_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
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

// sharedLimitsOn returns a registry counting in a store of its own (as
// `storage postgres` counts in the database), and that store: the page's
// records stay readable while the counts cannot be made once it is closed
// (the database away for the limits only, or a lost race with it).
func sharedLimitsOn(t *testing.T) (*ratelimit.Registry, *storage.Store) {
	t.Helper()
	counts, err := storage.Open(t.TempDir(), storage.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { counts.Close() })
	return ratelimit.NewSharedRegistry(counts.Counters(), nil), counts
}

// TestSignInFailureLimitsFailClosed: when the sign-in failure limits cannot
// be counted, a sign-in is refused with 503 and Retry-After before the
// password is looked at — a wrong password gets no 401, a right one no
// session — so an outage never opens an unlimited guessing window. While the
// counts work the same registry counts failures as usual, and sign-ups (a
// limit that fails open) still go through.
func TestSignInFailureLimitsFailClosed(t *testing.T) {
	reg, counts := sharedLimitsOn(t)
	f := newFixture(t, account.Options{RateLimits: reg, OpenRegistration: true})
	f.member("alice")
	c := f.browser()
	if r := f.signIn(c, "alice", "a wrong guess", ""); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password with the counts working: HTTP %d, want 401", r.StatusCode)
	}
	counts.Close()
	for _, pw := range []string{"another wrong guess", password} {
		r := f.signIn(c, "alice", pw, "")
		if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Fatalf("sign-in (password %q) without counts: HTTP %d, Retry-After %q; want 503 with Retry-After\n%s",
				pw, r.StatusCode, r.Header.Get("Retry-After"), r.body)
		}
		if sessionCookie(r) != nil {
			t.Fatal("a session was started without the failure limits")
		}
	}
	// A cheap limit fails open: the sign-up is served.
	r := f.post(c, "/auth/sign_up", url.Values{"username": {"bob"}, "password": {password}, "password_confirmation": {password}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-up without counts: HTTP %d, want 303 (the sign-up limit fails open)\n%s", r.StatusCode, r.body)
	}
}

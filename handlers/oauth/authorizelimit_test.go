package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
)

// wantCodesLimited checks the answer to an authorization past the
// member's limit of codes issued: the member pages' 429 page with
// Retry-After, and no redirect, so no code.
func wantCodesLimited(t *testing.T, r resp) {
	t.Helper()
	wantStatus(t, r, http.StatusTooManyRequests)
	wantBody(t, r, "You have authorized apps here many times in a short time")
	wantRetryAfter(t, r)
	if loc := r.Header.Get("Location"); loc != "" || strings.Contains(r.body, "hac_") {
		t.Fatalf("a refused authorization carries a code: Location %q, body:\n%s", loc, r.body)
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", r.Header)
	}
}

// TestAuthorizeLimitPerMember: a member gets AuthorizeLimit codes in the
// window, whether approved on the consent page or issued at once for an
// app the member approved before; the next is refused with 429 and
// Retry-After and no code, on both paths. Consent pages shown issue no
// code and do not count; another member is not affected; and the count
// survives a rebuild of the handler on the same registry (a config
// reload), counted in memory or in the store shared by several nodes.
func TestAuthorizeLimitPerMember(t *testing.T) {
	for _, counted := range []string{"memory", "store"} {
		t.Run(counted, func(t *testing.T) {
			f := newFixture(t, func(o *oauth.Options) {
				o.AuthorizeLimit, o.AuthorizeWindow = 3, time.Hour
				o.RateLimits = ratelimit.NewRegistry()
			})
			if counted == "store" {
				f.opts.RateLimits = ratelimit.NewSharedRegistry(f.store.Counters(), nil)
				f.rebuild()
			}
			f.member("alice")
			f.member("bob")
			alice := f.signedIn("alice")
			const cb = "https://app.example/cb"
			app := f.register("Tooter", cb, "read write")
			q := authQuery(app, cb, "read", "st")

			// Consent pages, however many, issue nothing and count nothing.
			for range 5 {
				wantBody(t, alice.consent(q, ""), "Authorize")
			}
			// Three codes: approved on the consent page, then issued at once.
			f.exchange(app, alice.approve(q), cb, "")
			alice.approve(q)
			alice.approve(q)

			// The fourth: refused, whether the consent is skipped ...
			wantCodesLimited(t, alice.get(oauth.AuthorizePath+"?"+q.Encode()))
			// ... or the member approves a consent page (prompt=consent, as
			// force_login comes back with, shows one and counts nothing).
			consent := url.Values{"prompt": {"consent"}}
			for k, v := range q {
				consent[k] = v
			}
			page := alice.consent(consent, "")
			wantCodesLimited(t, alice.decide(page, "approve"))

			// Bob, same app, is not affected.
			bob := f.signedIn("bob")
			f.exchange(app, bob.approve(q), cb, "")

			// A rebuilt handler on the same registry keeps alice's count.
			f.rebuild()
			wantCodesLimited(t, alice.get(oauth.AuthorizePath+"?"+q.Encode()))
			bob.approve(q)
		})
	}
}

// TestAuthorizeLimitPromptNone: with prompt=none (an OpenID relying
// party checking the session where no page may be shown), a refusal goes
// back on the redirect URI as temporarily_unavailable with state, and no
// code.
func TestAuthorizeLimitPromptNone(t *testing.T) {
	f := newOIDCFixture(t, func(o *oauth.Options) { o.AuthorizeLimit, o.AuthorizeWindow = 1, time.Hour })
	c := f.newRP(oauth.ClientSpec{})
	b := f.browser()
	// The grant (its token live), and the one code.
	if _, err := c.conf.Exchange(context.Background(), c.authorize(b, "alice", nil).Query().Get("code")); err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery(strings.SplitN(c.conf.AuthCodeURL("st-1"), "?", 2)[1])
	q.Set("prompt", "none")
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	wantRedirectError(t, r, "temporarily_unavailable", "st-1")
	if loc, _ := r.Location(); loc.Query().Get("code") != "" {
		t.Fatalf("a refused authorization carries a code: %s", loc)
	}
	q.Del("prompt")
	wantCodesLimited(t, b.get(oauth.AuthorizePath+"?"+q.Encode()))
}

// TestAuthorizeLimitOff: with the limit off, a member's codes are not
// counted.
func TestAuthorizeLimitOff(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.AuthorizeLimit = -1 })
	f.member("alice")
	b := f.signedIn("alice")
	const cb = "https://app.example/cb"
	app := f.register("Tooter", cb, "read")
	for range oauth.DefaultAuthorizeLimit + 1 {
		b.approve(authQuery(app, cb, "read", "st"))
	}
}

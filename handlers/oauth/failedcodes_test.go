package oauth_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
)

// wantCodeLimited checks the answer to a code whose member is over the
// failed-exchange limit: 429, OAuth's JSON error (invalid_grant with a
// description), Retry-After and no token.
func wantCodeLimited(t *testing.T, r resp) {
	t.Helper()
	wantStatus(t, r, http.StatusTooManyRequests)
	body := r.json(t)
	if body["error"] != "invalid_grant" {
		t.Fatalf("error %v, want invalid_grant: %s", body["error"], r.body)
	}
	if d, _ := body["error_description"].(string); !strings.Contains(d, "Too many failed authorization code exchanges") {
		t.Fatalf("error_description %q", d)
	}
	if _, ok := body["access_token"]; ok {
		t.Fatalf("a refused exchange carries a token: %s", r.body)
	}
	wantRetryAfter(t, r)
	if r.Header.Get("X-RateLimit-Remaining") != "0" || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", r.Header)
	}
}

// TestFailedCodeExchangesLimitedPerMember: failed exchanges of a member's
// codes (another redirect_uri, a wrong PKCE verifier, another client's
// credentials, a code used before) count against that member; past the
// limit the member's next code is refused with 429 and burnt, while other
// members' codes go on working, successful exchanges never count, and the
// member can still sign in.
func TestFailedCodeExchangesLimitedPerMember(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.FailedCodeLimit, o.FailedCodeWindow = 4, time.Hour })
	f.member("alice")
	f.member("bob")
	alice := f.signedIn("alice")
	const cb = "https://app.example/cb"
	app := f.register("Tooter", cb, "read")
	other := f.register("Other", cb, "read")
	c := &codeFixture{fixture: f, b: alice, app: app, cb: cb}
	verifier := strings.Repeat("v", 43)

	// Successful exchanges do not count, however many.
	for i := 0; i < 6; i++ {
		c.exchange(app, c.code("read", ""), cb, "")
	}

	// Four failures of different kinds.
	used := c.code("read", "")
	c.exchange(app, used, cb, "")
	wantOAuthError(t, c.token(codeForm(app, used, cb, "")), "invalid_grant")                               // 1: used before
	wantOAuthError(t, c.token(codeForm(app, c.code("read", ""), cb+"/other", "")), "invalid_grant")        // 2: redirect_uri
	wantOAuthError(t, c.token(codeForm(app, c.code("read", verifier), cb, verifier+"x")), "invalid_grant") // 3: PKCE
	wantOAuthError(t, c.token(codeForm(other, c.code("read", ""), cb, "")), "invalid_grant")               // 4: another client

	// The next code of alice, presented correctly, is refused and burnt.
	code := c.code("read", "")
	wantCodeLimited(t, c.token(codeForm(app, code, cb, "")))
	wantOAuthError(t, c.token(codeForm(app, code, cb, "")), "invalid_grant")
	wantCodeLimited(t, c.token(codeForm(app, c.code("read", verifier), cb, verifier)))

	// Codes that do not exist name no member: invalid_grant as ever.
	wantOAuthError(t, c.token(codeForm(app, "hac_"+strings.Repeat("A", 43), cb, "")), "invalid_grant")

	// Bob, same app and client address, is not affected.
	bob := f.signedIn("bob")
	bobCode := bob.approve(authQuery(app, cb, "read", "st"))
	tok := f.exchange(app, bobCode, cb, "")
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)

	// Alice is not locked out of signing in (the sign-in form answers 303).
	f.browser().signIn("alice")
}

// TestFailedCodeLimitOff: with the limit off, failures never refuse a
// member's next code.
func TestFailedCodeLimitOff(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.FailedCodeLimit = -1 })
	f.member("alice")
	b := f.signedIn("alice")
	const cb = "https://app.example/cb"
	app := f.register("Tooter", cb, "read")
	for i := 0; i < oauth.DefaultFailedCodeLimit+2; i++ {
		code := b.approve(authQuery(app, cb, "read", "st"))
		wantOAuthError(t, f.token(codeForm(app, code, cb+"/other", "")), "invalid_grant")
	}
	f.exchange(app, b.approve(authQuery(app, cb, "read", "st")), cb, "")
}

// TestFailedCodeLimitDefault: without configuration the limit is
// DefaultFailedCodeLimit failures.
func TestFailedCodeLimitDefault(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	b := f.signedIn("alice")
	const cb = "https://app.example/cb"
	app := f.register("Tooter", cb, "read")
	for i := 0; i < oauth.DefaultFailedCodeLimit; i++ {
		code := b.approve(authQuery(app, cb, "read", "st"))
		wantOAuthError(t, f.token(codeForm(app, code, cb+"/other", "")), "invalid_grant")
	}
	wantCodeLimited(t, f.token(codeForm(app, b.approve(authQuery(app, cb, "read", "st")), cb, "")))
}

// TestUnknownBearerTokensCountPerClientAddress: an unknown bearer token
// names no member, so it counts against the client address's token limit
// (with /oauth/token requests): past it the answer is 429 with Mastodon's
// JSON error, while a valid token from that address still works.
func TestUnknownBearerTokensCountPerClientAddress(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.TokenLimit, o.TokenWindow = 4, time.Hour })
	app := f.register("Tooter", "https://app.example/cb", "read")
	tok := f.memberToken(app, "alice", "read") // one /oauth/token request
	guess := "hat_" + strings.Repeat("A", 43)
	for i := 0; i < 3; i++ {
		wantJSONError(t, f.getWithToken(oauth.VerifyCredentialsPath, guess), http.StatusUnauthorized, "The access token is invalid")
	}
	r := f.getWithToken(oauth.VerifyCredentialsPath, guess)
	wantJSONError(t, r, http.StatusTooManyRequests, "Too many requests")
	wantRetryAfter(t, r)
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
}

// TestReplaysOfOneCodeCountOnce: a code counts at most twice against its
// member (the failure that burns it, the first reuse that revokes its
// token); using a burnt code again changes nothing and counts nothing, so
// whoever holds one leaked code cannot use up the member's limit with it.
func TestReplaysOfOneCodeCountOnce(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.FailedCodeLimit, o.FailedCodeWindow = 3, time.Hour })
	f.member("alice")
	b := f.signedIn("alice")
	const cb = "https://app.example/cb"
	app := f.register("Tooter", cb, "read")
	code := func() string { return b.approve(authQuery(app, cb, "read", "st")) }

	exchanged := code()
	f.exchange(app, exchanged, cb, "")
	burnt := code()
	wantOAuthError(t, f.token(codeForm(app, burnt, cb+"/other", "")), "invalid_grant") // counts: 1
	for i := 0; i < 5; i++ {
		wantOAuthError(t, f.token(codeForm(app, exchanged, cb, "")), "invalid_grant") // the first counts: 2
		wantOAuthError(t, f.token(codeForm(app, burnt, cb, "")), "invalid_grant")     // never counts
	}
	// Two failures counted, limit 3: a good code still works.
	f.exchange(app, code(), cb, "")
	// A third failure reaches the limit.
	wantOAuthError(t, f.token(codeForm(app, code(), cb+"/other", "")), "invalid_grant")
	wantCodeLimited(t, f.token(codeForm(app, code(), cb, "")))
}

// TestFailedCodeLimitFailsClosed: when the failed-exchange limit cannot be
// counted (counted in a shared store that does not answer; here a second
// store, closed, while the records' store works), a code is not exchanged:
// the answer is 503 with Retry-After and no token — never a token issued
// past a limit that could not be checked. The code is burnt, as after any
// refused exchange, and the refusal is not counted as the member's failure.
func TestFailedCodeLimitFailsClosed(t *testing.T) {
	counts, err := storage.Open(t.TempDir(), storage.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	reg := ratelimit.NewSharedRegistry(counts.Counters(), nil)
	f := newFixture(t, func(o *oauth.Options) {
		o.FailedCodeLimit, o.FailedCodeWindow, o.RateLimits = 4, time.Hour, reg
	})
	f.member("alice")
	alice := f.signedIn("alice")
	const cb = "https://app.example/cb"
	app := f.register("Tooter", cb, "read")
	c := &codeFixture{fixture: f, b: alice, app: app, cb: cb}
	c.exchange(app, c.code("read", ""), cb, "") // counts work: a token

	counts.Close()
	code := c.code("read", "")
	r := c.token(codeForm(app, code, cb, ""))
	wantStatus(t, r, http.StatusServiceUnavailable)
	if _, ok := r.json(t)["access_token"]; ok || r.Header.Get("Retry-After") == "" {
		t.Fatalf("exchange without the failure count: Retry-After %q, body %s", r.Header.Get("Retry-After"), r.body)
	}
	wantOAuthError(t, c.token(codeForm(app, code, cb, "")), "invalid_grant")
}

package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestAuthorizeAsksToSignIn: a browser without a session is sent to the
// sign-in page, which comes back to the same authorization request.
func TestAuthorizeAsksToSignIn(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	app := f.register("Tooter", "https://app.example/cb", "read")
	q := authQuery(app, "https://app.example/cb", "read", "xyz")
	b := f.browser()
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	wantStatus(t, r, http.StatusSeeOther)
	loc, _ := r.Location()
	if loc.Path != account.SignInPath {
		t.Fatalf("sent to %s, want the sign-in page", loc)
	}
	back, err := url.Parse(loc.Query().Get("return_to"))
	if err != nil || back.Path != oauth.AuthorizePath || back.Query().Encode() != q.Encode() {
		t.Fatalf("return_to %q does not come back to the request", loc.Query().Get("return_to"))
	}
	consent := b.consent(q, "alice")
	wantBody(t, consent, "Tooter")
}

// TestAuthorizeConsentNamesAppAndScopes: the consent page names the app,
// the member and each requested scope in plain words, and its form sends
// the request back unchanged.
func TestAuthorizeConsentNamesAppAndScopes(t *testing.T) {
	_, app, b := aliceAuthorizing(t, "Tooter <b>", "read write follow push")
	q := authQuery(app, "https://app.example/cb", "read:statuses write:statuses push", "s t&ate")
	consent := b.consent(q, "alice")
	wantBody(t, consent, "Tooter &lt;b&gt;")
	wantBody(t, consent, "@alice")
	for _, words := range []string{"Read your timelines and posts", "Publish posts for you", "Receive your push notifications"} {
		wantBody(t, consent, words)
	}
	if strings.Contains(consent.body, "Upload files") {
		t.Fatal("the page lists a scope that was not requested")
	}
	fm := form(t, consent, oauth.AuthorizePath)
	for _, k := range []string{"client_id", "redirect_uri", "state", "response_type"} {
		if fm.hidden.Get(k) != q.Get(k) {
			t.Errorf("hidden %s = %q, want %q", k, fm.hidden.Get(k), q.Get(k))
		}
	}
	if got := fm.hidden.Get("scope"); got != "read:statuses write:statuses push" {
		t.Errorf("hidden scope %q", got)
	}
	if len(fm.buttons["decision"]) != 2 {
		t.Errorf("decision buttons %v, want approve and deny", fm.buttons["decision"])
	}
	if csp := consent.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "https://app.example") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if consent.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("X-Frame-Options %q", consent.Header.Get("X-Frame-Options"))
	}
}

// TestAuthorizeApproveRedirectsWithCodeAndState: approval redirects to the
// exact registered URI (its own query kept) with code and the original state.
func TestAuthorizeApproveRedirectsWithCodeAndState(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	const cb = "https://app.example:8443/cb?tenant=1"
	app := f.register("Tooter", cb, "read")
	b := f.signedIn("alice")
	q := authQuery(app, cb, "read", "a state/with?odd=chars")
	r := b.decide(b.consent(q, "alice"), "approve")
	wantStatus(t, r, http.StatusFound)
	loc, _ := r.Location()
	if loc.Scheme != "https" || loc.Host != "app.example:8443" || loc.Path != "/cb" {
		t.Fatalf("redirected to %s", loc)
	}
	got := loc.Query()
	if got.Get("tenant") != "1" || got.Get("state") != q.Get("state") || !strings.HasPrefix(got.Get("code"), "hac_") {
		t.Fatalf("redirect query %v", got)
	}
	if r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("Cache-Control %q, Referrer-Policy %q", r.Header.Get("Cache-Control"), r.Header.Get("Referrer-Policy"))
	}
	tok := f.exchange(app, got.Get("code"), cb, "")
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
}

// TestAuthorizeDeclineRedirectsAccessDenied: declining redirects with
// error=access_denied and the state, and issues no code.
func TestAuthorizeDeclineRedirectsAccessDenied(t *testing.T) {
	f, app, b := aliceAuthorizing(t, "Tooter", "read")
	r := b.decide(b.consent(authQuery(app, "https://app.example/cb", "read", "xyz"), "alice"), "deny")
	wantStatus(t, r, http.StatusFound)
	loc, _ := r.Location()
	q := loc.Query()
	if loc.Host != "app.example" || q.Get("error") != "access_denied" || q.Get("state") != "xyz" || q.Has("code") {
		t.Fatalf("redirected to %s", loc)
	}
	if q.Get("error_description") == "" {
		t.Errorf("no error_description in %s", loc)
	}
	apps, _ := grants.Of(f.store).AuthorizedApps(t.Context(), mustMember(t, f, "alice").ID)
	if len(apps) != 0 {
		t.Fatalf("declining authorized %d apps", len(apps))
	}
}

// TestAuthorizeStateIsOptional: without state, none is added.
func TestAuthorizeStateIsOptional(t *testing.T) {
	_, app, b := aliceAuthorizing(t, "Tooter", "read")
	r := b.decide(b.consent(authQuery(app, "https://app.example/cb", "", ""), ""), "approve")
	wantStatus(t, r, http.StatusFound)
	loc, _ := r.Location()
	if loc.Query().Has("state") || loc.Query().Get("code") == "" {
		t.Fatalf("redirected to %s", loc)
	}
}

// TestAuthorizeForceLogin: force_login=true shows the sign-in form to
// whoever is signed in (Mastodon apps add or switch accounts with it;
// Mastodon.py's auth_request_url has it, interop/mastodon) and by itself
// changes nothing: the old session stays until another sign-in completes,
// which replaces it and comes back to the request without force_login
// (and with prompt=consent, see TestAuthorizeSkipsConsentForAMatchingGrant).
func TestAuthorizeForceLogin(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	f.member("bob")
	app := f.register("Tooter", "https://app.example/cb", "read")
	b := f.signedIn("alice")
	q := authQuery(app, "https://app.example/cb", "read", "st")
	q.Set("force_login", "true")
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "You are signed in as <strong>@alice</strong>")
	signIn := form(t, r, account.SignInPath)
	back, _ := url.Parse(signIn.hidden.Get("return_to"))
	if back.Path != oauth.AuthorizePath || back.Query().Has("force_login") || back.Query().Get("client_id") != app.ClientID || back.Query().Get("prompt") != "consent" {
		t.Fatalf("return_to %s", back)
	}
	// Alice is still signed in: showing the form ended nothing.
	wantStatus(t, b.get("/settings"), http.StatusOK)

	// Bob signs in on the same browser and approves as himself; Alice's
	// session on this browser is over.
	aliceSessions := func() int {
		m, _ := members.Of(f.store).Member(t.Context(), "alice")
		list, err := members.Of(f.store).Sessions(t.Context(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	if n := aliceSessions(); n != 1 {
		t.Fatalf("alice has %d sessions before bob signs in, want 1", n)
	}
	back2 := b.submit(r, account.SignInPath, url.Values{"username": {"bob"}, "password": {password}})
	wantStatus(t, back2, http.StatusSeeOther)
	if n := aliceSessions(); n != 0 {
		t.Fatalf("alice has %d sessions after bob signed in on her browser, want 0", n)
	}
	consent := b.follow(back2)
	wantStatus(t, consent, http.StatusOK)
	wantBody(t, consent, "@bob")
	approved := b.decide(consent, "approve")
	wantStatus(t, approved, http.StatusFound)
	l, _ := approved.Location()
	tok := f.exchange(app, l.Query().Get("code"), "https://app.example/cb", "")
	if got := f.getWithToken(oauth.VerifyCredentialsPath, tok).json(t)["username"]; got != "bob" {
		t.Fatalf("token of %v, want bob", got)
	}
}

// TestAuthorizeForceLoginFromAnotherSiteSignsNobodyOut: a link or an image
// on another site opening /oauth/authorize?force_login=true (a cross-site
// top-level GET) leaves the member signed in, and so does a cross-site
// POST to the sign-out page; only the site's own sign-out form signs out.
func TestAuthorizeForceLoginFromAnotherSiteSignsNobodyOut(t *testing.T) {
	f, app, b := aliceAuthorizing(t, "Tooter", "read")
	q := authQuery(app, "https://app.example/cb", "read", "st")
	q.Set("force_login", "true")
	req, err := http.NewRequest(http.MethodGet, f.url(oauth.AuthorizePath+"?"+q.Encode()), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	wantStatus(t, do(t, b.c, req), http.StatusOK)
	wantStatus(t, b.get("/settings"), http.StatusOK)

	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, err := http.NewRequest(method, f.url(account.SignOutPath), strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		do(t, b.c, req)
		wantStatus(t, b.get("/settings"), http.StatusOK)
	}
	wantStatus(t, b.post(account.SignOutPath, url.Values{}), http.StatusSeeOther)
	wantStatus(t, b.get("/settings"), http.StatusSeeOther)
}

// TestAuthorizeOmittedScopeMeansRead: without scope the request is for
// read only (not every registered scope), and read must be registered.
func TestAuthorizeOmittedScopeMeansRead(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	b := f.signedIn("alice")

	broad := f.register("Broad", "https://app.example/cb", "read write follow")
	code := b.approve(authQuery(broad, "https://app.example/cb", "", "s1"))
	r := f.token(codeForm(broad, code, "https://app.example/cb", ""))
	wantStatus(t, r, http.StatusOK)
	if got := r.json(t)["scope"]; got != "read" {
		t.Fatalf("scope %v, want read", got)
	}

	writeOnly := f.register("Writer", "https://app.example/cb", "write")
	r = b.get(oauth.AuthorizePath + "?" + authQuery(writeOnly, "https://app.example/cb", "", "s2").Encode())
	wantStatus(t, r, http.StatusFound)
	loc, _ := r.Location()
	if loc.Query().Get("error") != "invalid_scope" || loc.Query().Get("state") != "s2" {
		t.Fatalf("redirected to %s, want invalid_scope", loc)
	}
}

// TestAuthorizeRequestErrorsRedirect: a bad request from a known client
// with a registered redirect URI goes back to it with the error and state.
func TestAuthorizeRequestErrorsRedirect(t *testing.T) {
	_, app, b := aliceAuthorizing(t, "Tooter", "read write")
	verifier := strings.Repeat("v", 43)
	cases := []struct {
		name   string
		change func(url.Values)
		want   string
	}{
		{"unknown scope", func(q url.Values) { q.Set("scope", "read admin:write") }, "invalid_scope"},
		{"scope not registered", func(q url.Values) { q.Set("scope", "read push") }, "invalid_scope"},
		{"response_type token", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		// Doorkeeper 5.8 lib/doorkeeper/oauth/pre_authorization.rb
		// validate_params: a blank response_type is a missing parameter,
		// invalid_request, before the response type is checked.
		{"no response_type", func(q url.Values) { q.Del("response_type") }, "invalid_request"},
		{"empty response_type", func(q url.Values) { q.Set("response_type", "") }, "invalid_request"},
		{"pkce plain", func(q url.Values) { q.Set("code_challenge", verifier); q.Set("code_challenge_method", "plain") }, "invalid_request"},
		{"pkce without method", func(q url.Values) { q.Set("code_challenge", challenge(verifier)) }, "invalid_request"},
		{"pkce method without challenge", func(q url.Values) { q.Set("code_challenge_method", "S256") }, "invalid_request"},
		{"pkce malformed challenge", func(q url.Values) { q.Set("code_challenge", "abc"); q.Set("code_challenge_method", "S256") }, "invalid_request"},
		{"state twice", func(q url.Values) { q.Add("state", "other") }, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := authQuery(app, "https://app.example/cb", "read", "st")
			tc.change(q)
			r := b.get(oauth.AuthorizePath + "?" + q.Encode())
			wantStatus(t, r, http.StatusFound)
			loc, _ := r.Location()
			if loc.Host != "app.example" || loc.Query().Get("error") != tc.want || loc.Query().Has("code") {
				t.Fatalf("redirected to %s, want error=%s", loc, tc.want)
			}
			if tc.name != "state twice" && loc.Query().Get("state") != "st" {
				t.Fatalf("state lost: %s", loc)
			}
		})
	}
}

// TestAuthorizeUnknownClientOrRedirectShowsErrorPage: problems with the
// client or its redirect URI are shown, never redirected, signed in or not.
func TestAuthorizeUnknownClientOrRedirectShowsErrorPage(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	app := f.register("Tooter", "https://app.example/cb\nurn:ietf:wg:oauth:2.0:oob", "read")
	cases := []struct {
		name string
		q    url.Values
	}{
		{"unknown client", authQuery(credentialApplication{ClientID: "nope"}, "https://app.example/cb", "read", "s")},
		{"no client", url.Values{"response_type": {"code"}, "redirect_uri": {"https://app.example/cb"}}},
		{"unregistered redirect", authQuery(app, "https://evil.example/cb", "read", "s")},
		{"redirect with other path", authQuery(app, "https://app.example/cb/x", "read", "s")},
		{"redirect with query added", authQuery(app, "https://app.example/cb?x=1", "read", "s")},
		{"redirect with trailing slash", authQuery(app, "https://app.example/cb/", "read", "s")},
		{"redirect with port", authQuery(app, "https://app.example:443/cb", "read", "s")},
		{"redirect in other case", authQuery(app, "https://APP.example/cb", "read", "s")},
		{"no redirect", authQuery(app, "", "read", "s")},
		{"redirect twice", func() url.Values {
			q := authQuery(app, "https://app.example/cb", "read", "s")
			q.Add("redirect_uri", "https://evil.example/cb")
			return q
		}()},
		{"bad scope and bad redirect", authQuery(app, "https://evil.example/cb", "admin", "s")},
	}
	signedIn := f.signedIn("alice")
	for _, tc := range cases {
		for _, b := range []*browser{f.browser(), signedIn} {
			r := b.get(oauth.AuthorizePath + "?" + tc.q.Encode())
			if r.StatusCode != http.StatusBadRequest || r.Header.Get("Location") != "" {
				t.Fatalf("%s: HTTP %d, Location %q; want 400 page, no redirect", tc.name, r.StatusCode, r.Header.Get("Location"))
			}
			if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("%s: Content-Type %q", tc.name, r.Header.Get("Content-Type"))
			}
			wantBody(t, r, "An error has occurred")
		}
	}
	// A forged consent form with an unregistered redirect URI is refused too.
	consent := signedIn.consent(authQuery(app, "https://app.example/cb", "read", "s"), "")
	fm := form(t, consent, oauth.AuthorizePath)
	forged := fm.hidden
	forged.Set("redirect_uri", "https://evil.example/cb")
	forged.Set("decision", "approve")
	r := signedIn.post(oauth.AuthorizePath, forged)
	if r.StatusCode != http.StatusBadRequest || r.Header.Get("Location") != "" {
		t.Fatalf("forged approval: HTTP %d, Location %q", r.StatusCode, r.Header.Get("Location"))
	}
}

// TestAuthorizePKCEOnlyS256: an S256 challenge is accepted and bound to
// the code; the exchange needs its verifier.
func TestAuthorizePKCEOnlyS256(t *testing.T) {
	f, app, b := aliceAuthorizing(t, "Tooter", "read")
	verifier := "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	q := authQuery(app, "https://app.example/cb", "read", "st")
	q.Set("code_challenge", challenge(verifier))
	q.Set("code_challenge_method", "S256")
	consent := b.consent(q, "")
	if fm := form(t, consent, oauth.AuthorizePath); fm.hidden.Get("code_challenge") != challenge(verifier) || fm.hidden.Get("code_challenge_method") != "S256" {
		t.Fatalf("consent form drops the challenge: %v", fm.hidden)
	}
	code := b.approve(q)
	tok := f.exchange(app, code, "https://app.example/cb", verifier)
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
}

// TestAuthorizeOOBShowsCode: with the out-of-band URI the code is shown on
// a page for the member to copy, and works at the token endpoint; a
// decline is shown too.
func TestAuthorizeOOBShowsCode(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	app := f.register("CLI", oauth.OOBRedirectURI, "read")
	b := f.signedIn("alice")
	q := authQuery(app, oauth.OOBRedirectURI, "read", "")
	consent := b.consent(q, "")
	r := b.decide(consent, "approve")
	wantStatus(t, r, http.StatusOK)
	if r.Header.Get("Location") != "" {
		t.Fatalf("OOB approval redirected to %s", r.Header.Get("Location"))
	}
	m := secretPattern.FindString(r.body)
	if !strings.HasPrefix(m, "hac_") {
		t.Fatalf("no code on the page:\n%s", r.body)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the code page may be cached: %q", r.Header.Get("Cache-Control"))
	}
	tok := f.exchange(app, m, oauth.OOBRedirectURI, "")
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)

	// Already granted: prompt=consent asks again, to decline this time.
	q.Set("prompt", "consent")
	denied := b.decide(b.consent(q, ""), "deny")
	wantStatus(t, denied, http.StatusOK)
	wantBody(t, denied, "You denied CLI access to your account.")
	if strings.Contains(denied.body, "access_denied") {
		t.Error("the page a person reads shows the protocol's error code")
	}
	if secretPattern.MatchString(denied.body) {
		t.Fatal("a declined OOB request shows a code")
	}
}

// TestAuthorizeConsentFormIsProtected: a consent form posted from another
// site is refused, so no page can approve on a member's behalf.
func TestAuthorizeConsentFormIsProtected(t *testing.T) {
	f, app, b := aliceAuthorizing(t, "Tooter", "read")
	fm := form(t, b.consent(authQuery(app, "https://app.example/cb", "read", "s"), ""), oauth.AuthorizePath)
	values := fm.hidden
	values.Set("decision", "approve")
	req, _ := http.NewRequest(http.MethodPost, f.url(oauth.AuthorizePath), strings.NewReader(values.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	r := do(t, b.c, req)
	if r.StatusCode != http.StatusForbidden || r.Header.Get("Location") != "" {
		t.Fatalf("cross-site approval: HTTP %d, Location %q", r.StatusCode, r.Header.Get("Location"))
	}
}

// TestAuthorizeApprovalNeedsSession: a consent form posted after signing
// out leads to the sign-in page, not to a code.
func TestAuthorizeApprovalNeedsSession(t *testing.T) {
	_, app, b := aliceAuthorizing(t, "Tooter", "read")
	consent := b.consent(authQuery(app, "https://app.example/cb", "read", "s"), "")
	wantStatus(t, b.submit(consent, account.SignOutPath, nil), http.StatusSeeOther)
	r := b.decide(consent, "approve")
	wantStatus(t, r, http.StatusSeeOther)
	loc, _ := r.Location()
	if loc.Path != account.SignInPath {
		t.Fatalf("sent to %s", loc)
	}
}

// TestAuthorizeSuspendedMemberCannotApprove: a member suspended after
// opening the consent page can't approve.
func TestAuthorizeSuspendedMemberCannotApprove(t *testing.T) {
	f, app, b := aliceAuthorizing(t, "Tooter", "read")
	consent := b.consent(authQuery(app, "https://app.example/cb", "read", "s"), "")
	if _, err := members.Of(f.store).SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	r := b.decide(consent, "approve")
	if r.StatusCode == http.StatusFound {
		t.Fatalf("a suspended member approved: %s", r.Header.Get("Location"))
	}
}

// TestApprovalRedirectIsKeptOutOfAccessLogs: the approval's redirect carries
// the code in its Location, so the host is asked to leave that request out
// of its access log; a declined request and the OOB page (the code is in
// the body, which access logs do not record) are logged as usual.
func TestApprovalRedirectIsKeptOutOfAccessLogs(t *testing.T) {
	var kept []string
	f := newFixture(t, func(o *oauth.Options) {
		o.KeepOutOfAccessLog = func(r *http.Request) { kept = append(kept, r.Method+" "+r.URL.Path) }
	})
	f.member("alice")
	const cb = "https://app.example/cb"
	app := f.register("Tooter", cb+"\n"+oauth.OOBRedirectURI, "read")
	b := f.signedIn("alice")
	wantStatus(t, b.decide(b.consent(authQuery(app, cb, "read", "s"), "alice"), "deny"), http.StatusFound)
	wantStatus(t, b.decide(b.consent(authQuery(app, oauth.OOBRedirectURI, "read", ""), "alice"), "approve"), http.StatusOK)
	if len(kept) != 0 {
		t.Fatalf("kept out of the access log: %v, want nothing yet", kept)
	}
	wantStatus(t, b.decide(b.consent(authQuery(app, cb, "read", "s"), "alice"), "approve"), http.StatusFound)
	if want := []string{"POST " + oauth.AuthorizePath}; !reflect.DeepEqual(kept, want) {
		t.Fatalf("kept out of the access log: %v, want %v", kept, want)
	}
}

// TestAuthorizeSkipsConsentForAMatchingGrant: a member who granted an app
// scopes that cover the request, with a token still live, is not asked
// again: the code comes back at once, as Mastodon does (authorizations
// controller render_success: matching_token? and not force_login). Other
// members, wider scopes, a revoked grant, prompt=consent and force_login
// (after signing in again) still get the consent page.
func TestAuthorizeSkipsConsentForAMatchingGrant(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	f.member("bob")
	const cb = "https://app.example/cb"
	app := f.register("Tooter", cb, "read write follow")
	alice := f.signedIn("alice")
	ask := func(scope string, extra ...string) url.Values {
		q := authQuery(app, cb, scope, "st")
		for i := 0; i+1 < len(extra); i += 2 {
			q.Set(extra[i], extra[i+1])
		}
		return q
	}
	wantConsent := func(b *browser, q url.Values, why string) {
		t.Helper()
		r := b.get(oauth.AuthorizePath + "?" + q.Encode())
		if r.StatusCode != http.StatusOK || !strings.Contains(r.body, `value="approve"`) {
			t.Fatalf("%s: HTTP %d (Location %q), want the consent page", why, r.StatusCode, r.Header.Get("Location"))
		}
	}

	// Before any grant: the consent page. A code approved but not yet
	// exchanged is no grant either.
	wantConsent(alice, ask("read write"), "first request")
	_ = alice.decide(alice.consent(ask("read write"), ""), "approve")
	wantConsent(alice, ask("read write"), "with a code not exchanged")

	tok := f.exchange(app, alice.approve(ask("read write")), cb, "")
	// Covered: read write again, read alone, read:statuses (read covers it).
	for _, scope := range []string{"read write", "read", "read:statuses write:media"} {
		r := alice.get(oauth.AuthorizePath + "?" + ask(scope).Encode())
		wantStatus(t, r, http.StatusFound)
		loc, _ := r.Location()
		if loc.Query().Get("state") != "st" || !strings.HasPrefix(loc.String(), cb+"?") {
			t.Fatalf("%s: redirected to %s", scope, loc)
		}
		// The code works (the token is live; 403 is read:statuses lacking
		// read:accounts).
		tok2 := f.exchange(app, loc.Query().Get("code"), cb, "")
		if r := f.getWithToken(oauth.VerifyCredentialsPath, tok2); r.StatusCode == http.StatusUnauthorized {
			t.Fatalf("%s: the token of the skipped consent is refused", scope)
		}
	}
	// HEAD issues nothing: it shows the page's headers.
	head, err := http.NewRequest(http.MethodHead, f.url(oauth.AuthorizePath+"?"+ask("read").Encode()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := do(t, alice.c, head); r.StatusCode == http.StatusFound {
		t.Fatal("HEAD issued a code")
	}
	// Not covered: a scope never granted.
	wantConsent(alice, ask("read write follow"), "a wider scope")
	wantConsent(alice, ask("read", "prompt", "consent"), "prompt=consent")

	// Another member is asked.
	bob := f.signedIn("bob")
	wantConsent(bob, ask("read"), "another member")

	// force_login asks to sign in again; signing in shows the consent page.
	r := alice.get(oauth.AuthorizePath + "?" + ask("read", "force_login", "true").Encode())
	wantStatus(t, r, http.StatusOK)
	back := alice.submit(r, account.SignInPath, url.Values{"username": {"alice"}, "password": {password}})
	wantStatus(t, back, http.StatusSeeOther)
	if c := alice.follow(back); c.StatusCode != http.StatusOK || !strings.Contains(c.body, `value="approve"`) {
		t.Fatalf("after force_login and signing in: HTTP %d, want the consent page", c.StatusCode)
	}

	// Revoked: asked again, and the old token is dead.
	m, err := members.Of(f.store).Member(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err = grants.Of(f.store).RevokeAppForMember(t.Context(), m.ID, app.ClientID); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnauthorized)
	wantConsent(alice, ask("read"), "after revoking")
}

// TestConsentPageSaysWhoAndWhat: the consent page names
// the app and its website's host, says it is not made by this site (by the
// site's name), gives each scope in Mastodon's words and what it gives on a
// Hearth site, says where the member goes next, and makes Approve the main
// button with Deny second.
func TestConsentPageSaysWhoAndWhat(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.InstanceTitle = "Maple Street Commons" })
	f.member("alice")
	form := url.Values{"client_name": {"Pinecone"}, "redirect_uris": {"https://pinecone.example/cb"}, "scopes": {"read write follow"},
		"website": {"https://pinecone.example/about"}}
	r := f.postForm(oauth.AppsPath, form)
	wantStatus(t, r, http.StatusOK)
	var app credentialApplication
	if err := json.Unmarshal([]byte(r.body), &app); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn("alice")
	page := b.consent(authQuery(app, "https://pinecone.example/cb", "read write follow", "s"), "")
	for _, want := range []string{
		"<title>Authorize Pinecone · ",
		"Pinecone is not made by Maple Street Commons",
		`<a href="https://pinecone.example/about" rel="noopener noreferrer">pinecone.example</a>`,
		"Read everything in your account (<code>read</code>)", "On this site: read your saved articles",
		"(<code>write</code>)", "On this site: save, change and delete your saved articles",
		"(<code>follow</code>)", "On this site: nothing yet",
		"<strong>https://pinecone.example</strong>",
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	approve, deny := strings.Index(page.body, `<button type="submit" name="decision" value="approve">Approve</button>`),
		strings.Index(page.body, `<button class="secondary" type="submit" name="decision" value="deny">Deny</button>`)
	if approve < 0 || deny < approve {
		t.Errorf("Approve is not the first, main button before a secondary Deny")
	}
}

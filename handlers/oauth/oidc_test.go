package oauth_test

// The OpenID provider against a real relying party: github.com/coreos/go-oidc/v3
// v3.21.0 with golang.org/x/oauth2. What go-oidc checks, read in its sources
// (oidc/oidc.go and oidc/verify.go at v3.21.0, the module proxy's copy):
// NewProvider fetches strings.TrimSuffix(issuer, "/") +
// "/.well-known/openid-configuration" and refuses a document whose issuer is
// not the string it was given, byte for byte; IDTokenVerifier.Verify checks
// iss, aud, exp, and the signature against the JWKS with the algorithms of
// id_token_signing_alg_values_supported, fetching the key set again for an
// unknown kid; IDToken.VerifyAccessToken checks at_hash. The negative cases
// follow the OpenID conformance suite's Basic OP plan, one named test each.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

const rpCallback = "https://rp.example/callback"
const rpLoggedOut = "https://rp.example/bye"

// rp is a relying party: its registration and go-oidc's view of the provider.
type rp struct {
	f        *fixture
	app      *grants.App
	secret   string
	provider *oidc.Provider
	conf     oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// newRP registers an operator client and discovers the provider as a
// relying party does.
func (f *fixture) newRP(spec oauth.ClientSpec) *rp {
	f.t.Helper()
	if spec.Name == "" {
		spec.Name = "Grafana"
	}
	if spec.RedirectURIs == nil {
		spec.RedirectURIs = []string{rpCallback}
	}
	if spec.PostLogoutRedirectURIs == nil {
		spec.PostLogoutRedirectURIs = []string{rpLoggedOut}
	}
	if spec.Scopes == nil {
		spec.Scopes = grants.OIDCScopes
	}
	app, secret, err := oauth.RegisterClient(context.Background(), f.store, spec)
	if err != nil {
		f.t.Fatal(err)
	}
	provider, err := oidc.NewProvider(context.Background(), f.ts.URL+"/")
	if err != nil {
		f.t.Fatalf("discovery: %v", err)
	}
	return &rp{f: f, app: app, secret: secret, provider: provider,
		conf: oauth2.Config{ClientID: app.ClientID, ClientSecret: secret, Endpoint: provider.Endpoint(),
			RedirectURL: rpCallback, Scopes: []string{oidc.ScopeOpenID, "profile", "email", "groups", oidc.ScopeOfflineAccess}},
		verifier: provider.Verifier(&oidc.Config{ClientID: app.ClientID}),
	}
}

// authorize runs the browser through sign-in (as username, when asked) and
// consent, and returns the redirect back to the relying party.
func (c *rp) authorize(b *browser, username string, extra url.Values) *url.URL {
	c.f.t.Helper()
	q, _ := url.ParseQuery(strings.SplitN(c.conf.AuthCodeURL("st-1"), "?", 2)[1])
	for k, v := range extra {
		q[k] = v
	}
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	if r.StatusCode == http.StatusSeeOther {
		r = b.follow(r)
		wantStatus(c.f.t, r, http.StatusOK)
	}
	if hasForm(c.f.t, r, account.SignInPath) {
		back := b.submit(r, account.SignInPath, url.Values{"username": {username}, "password": {password}})
		wantStatus(c.f.t, back, http.StatusSeeOther)
		r = b.follow(back)
	}
	if r.StatusCode == http.StatusOK {
		r = b.decide(r, "approve")
	}
	wantStatus(c.f.t, r, http.StatusFound)
	loc, err := r.Location()
	if err != nil {
		c.f.t.Fatal(err)
	}
	return loc
}

func hasForm(t testing.TB, r resp, action string) bool {
	for _, f := range forms(t, r.body) {
		if f.action == action {
			return true
		}
	}
	return false
}

// sessionCookie is the browser's session cookie for the test server.
func (b *browser) sessionCookie() string {
	u, _ := url.Parse(b.f.ts.URL)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == account.CookieName {
			return c.Value
		}
	}
	return ""
}

// signInFlow is the whole code flow with PKCE and a nonce: the tokens and
// the verified ID token.
func (c *rp) signInFlow(b *browser, username string) (*oauth2.Token, *oidc.IDToken, string) {
	c.f.t.Helper()
	verifier := oauth2.GenerateVerifier()
	loc := c.authorize(b, username, url.Values{"nonce": {"n-0S6_WzA2Mj"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}})
	if loc.Query().Get("state") != "st-1" {
		c.f.t.Fatalf("state not echoed: %s", loc)
	}
	tok, err := c.conf.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		c.f.t.Fatalf("exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := c.verifier.Verify(context.Background(), raw)
	if err != nil {
		c.f.t.Fatalf("verify the ID token: %v", err)
	}
	if idt.Nonce != "n-0S6_WzA2Mj" {
		c.f.t.Fatalf("nonce %q not echoed", idt.Nonce)
	}
	return tok, idt, raw
}

func newOIDCFixture(t *testing.T, configure ...func(*oauth.Options)) *fixture {
	f := newFixture(t, configure...)
	m := f.member("alice")
	ctx := context.Background()
	if _, err := members.Of(f.store).SetEmail(ctx, "alice", "alice@example.org", true); err != nil {
		t.Fatal(err)
	}
	if _, err := members.Of(f.store).SetGroups(ctx, "alice", []string{"staff", "admins"}); err != nil {
		t.Fatal(err)
	}
	_ = m
	return f
}

// TestOIDCCodeFlowWithGoOIDC: discovery, code + PKCE + nonce, the ID token
// verified against the JWKS, at_hash, the claims, userinfo with the same
// sub, and the RFC 8414 document's issuer string in both documents.
func TestOIDCCodeFlowWithGoOIDC(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	tok, idt, _ := c.signInFlow(f.browser(), "alice")
	if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
		t.Errorf("at_hash: %v", err)
	}
	var claims struct {
		Name              string   `json:"name"`
		PreferredUsername string   `json:"preferred_username"`
		Email             string   `json:"email"`
		EmailVerified     bool     `json:"email_verified"`
		Groups            []string `json:"groups"`
		AuthTime          int64    `json:"auth_time"`
		AMR               []string `json:"amr"`
	}
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if claims.PreferredUsername != "alice" || claims.Name != "Display alice" || claims.Email != "alice@example.org" || !claims.EmailVerified ||
		strings.Join(claims.Groups, ",") != "admins,staff" || claims.AuthTime == 0 || strings.Join(claims.AMR, ",") != "pwd" {
		t.Errorf("claims %+v", claims)
	}
	m, _ := members.Of(f.store).Member(context.Background(), "alice")
	if idt.Subject == "" || strings.Contains(idt.Subject, m.ID) || strings.Contains(idt.Subject, "alice") {
		t.Errorf("sub %q is not opaque", idt.Subject)
	}
	if tok.RefreshToken == "" || tok.Expiry.IsZero() {
		t.Errorf("offline_access: refresh token %v, expiry %v", tok.RefreshToken != "", tok.Expiry)
	}
	ui, err := c.provider.UserInfo(context.Background(), oauth2.StaticTokenSource(tok))
	if err != nil {
		t.Fatalf("userinfo: %v", err)
	}
	if ui.Subject != idt.Subject || ui.Email != "alice@example.org" || !ui.EmailVerified {
		t.Errorf("userinfo %+v, ID token sub %s", ui, idt.Subject)
	}
	// The same member signs in again: the same sub (stable).
	_, again, _ := c.signInFlow(f.browser(), "alice")
	if again.Subject != idt.Subject {
		t.Errorf("sub changed: %s then %s", idt.Subject, again.Subject)
	}
	meta := f.request(http.MethodGet, oauth.MetadataPath, "", nil).json(t)
	disc := f.request(http.MethodGet, oauth.DiscoveryPath, "", nil)
	if disc.json(t)["issuer"] != meta["issuer"] || !strings.HasSuffix(meta["issuer"].(string), "/") {
		t.Errorf("issuers differ: %v and %v", disc.json(t)["issuer"], meta["issuer"])
	}
	if !strings.Contains(disc.Header.Get("Cache-Control"), "max-age=") {
		t.Errorf("discovery Cache-Control %q", disc.Header.Get("Cache-Control"))
	}
	jwks := f.request(http.MethodGet, oauth.JWKSPath, "", nil)
	if !strings.Contains(jwks.Header.Get("Cache-Control"), "max-age=") {
		t.Errorf("JWKS Cache-Control %q", jwks.Header.Get("Cache-Control"))
	}
}

// TestOIDCPairwiseSubject: a client that asks for pairwise subjects gets a
// sub of its own; another client's sub for the same member differs.
func TestOIDCPairwiseSubject(t *testing.T) {
	f := newOIDCFixture(t)
	public := f.newRP(oauth.ClientSpec{Name: "one"})
	pairwise := f.newRP(oauth.ClientSpec{Name: "two", Pairwise: true})
	_, a, _ := public.signInFlow(f.browser(), "alice")
	_, b, _ := pairwise.signInFlow(f.browser(), "alice")
	if a.Subject == b.Subject {
		t.Errorf("the pairwise client got the public sub %s", a.Subject)
	}
}

// TestOIDCRefreshRotationAndReuse: a refresh hands out a new refresh
// token; presenting the old one again is refused and ends the family: the
// newest refresh token and the access tokens stop working too.
func TestOIDCRefreshRotationAndReuse(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	tok, _, _ := c.signInFlow(f.browser(), "alice")
	ctx := context.Background()
	expired := &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Now().Add(-time.Hour)}
	next, err := c.conf.TokenSource(ctx, expired).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if next.RefreshToken == "" || next.RefreshToken == tok.RefreshToken || next.AccessToken == tok.AccessToken {
		t.Fatal("the refresh token was not rotated")
	}
	if raw, _ := next.Extra("id_token").(string); raw == "" {
		t.Error("no ID token on refresh")
	} else if _, err := c.verifier.Verify(ctx, raw); err != nil {
		t.Errorf("refreshed ID token: %v", err)
	}
	wantStatus(t, f.getWithToken(oauth.UserinfoPath, next.AccessToken), http.StatusOK)
	// The old refresh token again: reuse.
	_, err = c.conf.TokenSource(ctx, expired).Token()
	var re *oauth2.RetrieveError
	if err == nil || !asRetrieve(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("reused refresh token: %v", err)
	}
	_, err = c.conf.TokenSource(ctx, &oauth2.Token{RefreshToken: next.RefreshToken, Expiry: time.Now().Add(-time.Hour)}).Token()
	if err == nil {
		t.Fatal("the family's newest refresh token still works after a reuse")
	}
	for _, at := range []string{tok.AccessToken, next.AccessToken} {
		wantChallenge(t, f.getWithToken(oauth.UserinfoPath, at), http.StatusUnauthorized, "invalid_token")
	}
}

func asRetrieve(err error, re **oauth2.RetrieveError) bool {
	for e := err; e != nil; {
		if r, ok := e.(*oauth2.RetrieveError); ok {
			*re = r
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// TestOIDCRevokeRefreshToken: revoking a refresh token (RFC 7009) ends it
// and the access tokens of its grant.
func TestOIDCRevokeRefreshToken(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	tok, _, _ := c.signInFlow(f.browser(), "alice")
	r := f.postForm(oauth.RevokePath, url.Values{"token": {tok.RefreshToken}}, "Authorization", basic(c.app.ClientID, c.secret))
	wantStatus(t, r, http.StatusOK)
	wantChallenge(t, f.getWithToken(oauth.UserinfoPath, tok.AccessToken), http.StatusUnauthorized, "invalid_token")
	r = f.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}, "Authorization", basic(c.app.ClientID, c.secret))
	wantOAuthError(t, r, "invalid_grant")
}

func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// TestOIDCClientSecretBasicAndPost: both methods work; a wrong secret in
// either is invalid_client; both at once is invalid_request.
func TestOIDCClientSecretBasicAndPost(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"hrf_unknown"}}
	wantOAuthError(t, f.token(form, "Authorization", basic(c.app.ClientID, c.secret)), "invalid_grant")
	post := url.Values{"client_id": {c.app.ClientID}, "client_secret": {c.secret}}
	for k, v := range form {
		post[k] = v
	}
	wantOAuthError(t, f.token(post), "invalid_grant")
	// RFC 6749 section 5.2: a client that tried HTTP Basic is challenged
	// in Basic, at every endpoint that authenticates clients.
	t.Run("wrong secret in Basic", func(t *testing.T) {
		for _, path := range []string{oauth.TokenPath, oauth.RevokePath, oauth.IntrospectPath} {
			r := f.postForm(path, url.Values{"grant_type": {"refresh_token"}, "token": {"x"}}, "Authorization", basic(c.app.ClientID, c.secret+"x"))
			wantOAuthError(t, r, "invalid_client")
			if ch := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Basic ") {
				t.Errorf("%s: WWW-Authenticate %q after Basic credentials", path, ch)
			}
		}
	})
	t.Run("wrong secret in the body", func(t *testing.T) {
		bad := url.Values{"client_secret": {c.secret + "x"}, "client_id": {c.app.ClientID}, "grant_type": {"refresh_token"}, "refresh_token": {"x"}}
		wantOAuthError(t, f.token(bad), "invalid_client")
	})
	t.Run("both methods", func(t *testing.T) {
		wantOAuthError(t, f.token(post, "Authorization", basic(c.app.ClientID, c.secret)), "invalid_request")
	})
}

// TestOIDCPublicClientNeedsPKCE: a public client has no secret and must use
// PKCE; it signs in with go-oidc like any other.
func TestOIDCPublicClientNeedsPKCE(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{Public: true})
	if c.secret != "" {
		t.Fatal("a public client got a secret")
	}
	c.conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	c.signInFlow(f.browser(), "alice")
	b := f.signedIn("alice")
	q, _ := url.ParseQuery(strings.SplitN(c.conf.AuthCodeURL("st-1"), "?", 2)[1])
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	wantRedirectError(t, r, "invalid_request", "st-1")
}

// wantRedirectError checks an error sent back to the relying party.
func wantRedirectError(t *testing.T, r resp, code, state string) {
	t.Helper()
	wantStatus(t, r, http.StatusFound)
	loc, _ := r.Location()
	if loc.Query().Get("error") != code || loc.Query().Get("state") != state || !strings.HasPrefix(loc.String(), rpCallback) {
		t.Fatalf("redirect %s, want error=%s with state %s", loc, code, state)
	}
}

// TestOIDCUnregisteredOrAlteredRedirectURI: an unregistered redirect_uri
// is never redirected to; one altered at the token endpoint is invalid_grant.
func TestOIDCUnregisteredOrAlteredRedirectURI(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	b := f.signedIn("alice")
	q, _ := url.ParseQuery(strings.SplitN(c.conf.AuthCodeURL("st-1"), "?", 2)[1])
	q.Set("redirect_uri", rpCallback+"/evil")
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	wantStatus(t, r, http.StatusBadRequest)
	loc := c.authorize(b, "alice", nil)
	alt := c.conf
	alt.RedirectURL = rpCallback + "?x=1"
	_, err := alt.Exchange(context.Background(), loc.Query().Get("code"))
	var re *oauth2.RetrieveError
	if !asRetrieve(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("altered redirect_uri: %v", err)
	}
}

// TestOIDCCodeReuseRevokesTokens: a code used twice is refused, and the
// tokens issued from it stop working (refresh token included).
func TestOIDCCodeReuseRevokesTokens(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	loc := c.authorize(f.browser(), "alice", nil)
	code := loc.Query().Get("code")
	tok, err := c.conf.Exchange(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.conf.Exchange(context.Background(), code)
	var re *oauth2.RetrieveError
	if !asRetrieve(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("second exchange: %v", err)
	}
	wantChallenge(t, f.getWithToken(oauth.UserinfoPath, tok.AccessToken), http.StatusUnauthorized, "invalid_token")
	r := f.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}, "Authorization", basic(c.app.ClientID, c.secret))
	wantOAuthError(t, r, "invalid_grant")
}

// TestOIDCWrongCodeVerifier: a verifier that does not match the challenge
// is invalid_grant.
func TestOIDCWrongCodeVerifier(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	v := oauth2.GenerateVerifier()
	loc := c.authorize(f.browser(), "alice", url.Values{"code_challenge": {oauth2.S256ChallengeFromVerifier(v)}, "code_challenge_method": {"S256"}})
	_, err := c.conf.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier()))
	var re *oauth2.RetrieveError
	if !asRetrieve(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("wrong verifier: %v", err)
	}
}

// TestOIDCNeverIssuesAlgNone: only RS256 (the default) and ES256 are
// advertised, RS256 is used unless the client registered ES256, and an
// unsigned (alg none) ID token is no hint at logout.
func TestOIDCNeverIssuesAlgNone(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	_, _, raw := c.signInFlow(f.browser(), "alice")
	var header struct{ Alg, Kid string }
	h, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	if err := json.Unmarshal(h, &header); err != nil || header.Alg != "RS256" || header.Kid == "" {
		t.Errorf("header %s", h)
	}
	disc := f.request(http.MethodGet, oauth.DiscoveryPath, "", nil).json(t)
	if algs, _ := json.Marshal(disc["id_token_signing_alg_values_supported"]); string(algs) != `["RS256","ES256"]` {
		t.Errorf("algorithms %s", algs)
	}
	parts := strings.Split(raw, ".")
	unsigned := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + "."
	r := f.browser().get(oauth.EndSessionPath + "?" + url.Values{"id_token_hint": {unsigned}}.Encode())
	wantStatus(t, r, http.StatusBadRequest)
}

// TestOIDCPromptNoneWithoutSession: prompt=none without a session answers
// login_required at once; with a session but no grant, consent_required.
func TestOIDCPromptNoneWithoutSession(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	q, _ := url.ParseQuery(strings.SplitN(c.conf.AuthCodeURL("st-1"), "?", 2)[1])
	q.Set("prompt", "none")
	b := f.browser()
	wantRedirectError(t, b.get(oauth.AuthorizePath+"?"+q.Encode()), "login_required", "st-1")
	b.signIn("alice")
	wantRedirectError(t, b.get(oauth.AuthorizePath+"?"+q.Encode()), "consent_required", "st-1")
	if _, err := c.conf.Exchange(context.Background(), c.authorize(b, "alice", nil).Query().Get("code")); err != nil {
		t.Fatal(err)
	}
	r := b.get(oauth.AuthorizePath + "?" + q.Encode())
	wantStatus(t, r, http.StatusFound)
	if loc, _ := r.Location(); loc.Query().Get("code") == "" {
		t.Errorf("prompt=none with a grant: %s", loc)
	}
}

// TestOIDCPromptLoginForcesSignIn: prompt=login (and max_age=0) ask for
// the password again, whoever is signed in; the session is replaced once
// that sign-in completes (showing the form signs nobody out), and the new
// sign-in's auth_time is in the ID token.
func TestOIDCPromptLoginForcesSignIn(t *testing.T) {
	for _, extra := range []url.Values{{"prompt": {"login"}}, {"max_age": {"0"}}} {
		f := newOIDCFixture(t)
		c := f.newRP(oauth.ClientSpec{})
		b := f.browser()
		c.authorize(b, "alice", nil)
		q, _ := url.ParseQuery(strings.SplitN(c.conf.AuthCodeURL("st-1"), "?", 2)[1])
		for k, v := range extra {
			q[k] = v
		}
		before := b.sessionCookie()
		r := b.get(oauth.AuthorizePath + "?" + q.Encode())
		wantStatus(t, r, http.StatusOK)
		if !hasForm(t, r, account.SignInPath) {
			t.Fatalf("%v: no sign-in form:\n%s", extra, r.body)
		}
		if r.Header.Get("Set-Cookie") != "" {
			t.Errorf("%v: showing the form changed the session: %q", extra, r.Header.Get("Set-Cookie"))
		}
		loc := c.authorize(b, "alice", extra)
		if after := b.sessionCookie(); after == before || after == "" {
			t.Errorf("%v: no fresh sign-in", extra)
		}
		tok, err := c.conf.Exchange(context.Background(), loc.Query().Get("code"))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := tok.Extra("id_token").(string)
		idt, err := c.verifier.Verify(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		var claims struct {
			AuthTime int64 `json:"auth_time"`
		}
		_ = idt.Claims(&claims)
		if claims.AuthTime == 0 {
			t.Errorf("%v: no auth_time", extra)
		}
	}
}

// TestOIDCRequestObjectsRefused: request and request_uri are refused as
// unsupported, on the redirect with state.
func TestOIDCRequestObjectsRefused(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	b := f.signedIn("alice")
	for param, code := range map[string]string{"request": "request_not_supported", "request_uri": "request_uri_not_supported"} {
		q, _ := url.ParseQuery(strings.SplitN(c.conf.AuthCodeURL("st-1"), "?", 2)[1])
		q.Set(param, "eyJhbGciOiJub25lIn0.e30.")
		wantRedirectError(t, b.get(oauth.AuthorizePath+"?"+q.Encode()), code, "st-1")
	}
}

// TestOIDCUserinfoExpiredOrRevoked: userinfo with an expired or revoked
// access token is 401 with a WWW-Authenticate challenge.
func TestOIDCUserinfoExpiredOrRevoked(t *testing.T) {
	f := newOIDCFixture(t, func(o *oauth.Options) { o.AccessTokenLifetime = time.Second })
	c := f.newRP(oauth.ClientSpec{})
	tok, _, _ := c.signInFlow(f.browser(), "alice")
	time.Sleep(2 * time.Second)
	wantChallenge(t, f.getWithToken(oauth.UserinfoPath, tok.AccessToken), http.StatusUnauthorized, "invalid_token")
	fresh, _, _ := c.signInFlow(f.browser(), "alice")
	wantStatus(t, f.postForm(oauth.RevokePath, url.Values{"token": {fresh.AccessToken}, "client_id": {c.app.ClientID}, "client_secret": {c.secret}}), http.StatusOK)
	wantChallenge(t, f.getWithToken(oauth.UserinfoPath, fresh.AccessToken), http.StatusUnauthorized, "invalid_token")
}

// TestOIDCIntrospection: RFC 7662 for a confidential client: live tokens
// are active with their scope and sub; anything else is active false.
func TestOIDCIntrospection(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	tok, idt, _ := c.signInFlow(f.browser(), "alice")
	auth := basic(c.app.ClientID, c.secret)
	for _, tt := range []struct {
		token  string
		active bool
	}{{tok.AccessToken, true}, {tok.RefreshToken, true}, {"hat_nothing", false}} {
		r := f.postForm(oauth.IntrospectPath, url.Values{"token": {tt.token}}, "Authorization", auth)
		wantStatus(t, r, http.StatusOK)
		m := r.json(t)
		if m["active"] != tt.active || (tt.active && (m["sub"] != idt.Subject || m["client_id"] != c.app.ClientID || m["username"] != "alice")) {
			t.Errorf("introspect: %s", r.body)
		}
	}
	wantOAuthError(t, f.postForm(oauth.IntrospectPath, url.Values{"token": {tok.AccessToken}}), "invalid_client")
}

// TestOIDCLogout: RP-initiated logout asks the member, then ends the
// session and goes back to the registered post_logout_redirect_uri with
// state; an unregistered one is refused.
func TestOIDCLogout(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	b := f.browser()
	_, _, raw := c.signInFlow(b, "alice")
	bad := b.get(oauth.EndSessionPath + "?" + url.Values{"id_token_hint": {raw}, "post_logout_redirect_uri": {"https://evil.example/"}}.Encode())
	wantStatus(t, bad, http.StatusBadRequest)
	page := b.get(oauth.EndSessionPath + "?" + url.Values{"id_token_hint": {raw}, "post_logout_redirect_uri": {rpLoggedOut}, "state": {"s2"}}.Encode())
	wantStatus(t, page, http.StatusOK)
	// Opening the page (a link from anywhere) signs nobody out.
	if page.Header.Get("Set-Cookie") != "" {
		t.Errorf("the logout page changed the session: %q", page.Header.Get("Set-Cookie"))
	}
	r := b.submit(page, oauth.EndSessionPath, url.Values{"decision": {"sign_out"}})
	wantStatus(t, r, http.StatusFound)
	if r.Header.Get("Location") != rpLoggedOut+"?state=s2" {
		t.Errorf("back to %s", r.Header.Get("Location"))
	}
	q, _ := url.ParseQuery(strings.SplitN(c.conf.AuthCodeURL("st-1"), "?", 2)[1])
	q.Set("prompt", "none")
	wantRedirectError(t, b.get(oauth.AuthorizePath+"?"+q.Encode()), "login_required", "st-1")
	// Without a hint the member confirms.
	b2 := f.signedIn("alice")
	page = b2.get(oauth.EndSessionPath)
	wantStatus(t, page, http.StatusOK)
	wantStatus(t, b2.submit(page, oauth.EndSessionPath, url.Values{"decision": {"sign_out"}}), http.StatusOK)
	wantRedirectError(t, b2.get(oauth.AuthorizePath+"?"+q.Encode()), "login_required", "st-1")
}

// TestLogoutWithHintIsKeptOutOfAccessLogs: an RP-initiated logout URL
// carries the member's ID token (id_token_hint), so the host is asked to
// leave that request out of its access log, and the page it shows sends no
// Referer, which would carry the URL into the next request's log line (the
// confirmation's POST). A logout without a hint is logged as usual.
func TestLogoutWithHintIsKeptOutOfAccessLogs(t *testing.T) {
	var kept []string
	f := newOIDCFixture(t, func(o *oauth.Options) {
		o.KeepOutOfAccessLog = func(r *http.Request) { kept = append(kept, r.Method+" "+r.URL.Path) }
	})
	c := f.newRP(oauth.ClientSpec{})
	b := f.browser()
	_, _, raw := c.signInFlow(b, "alice")
	kept = nil
	page := b.get(oauth.EndSessionPath + "?" + url.Values{"id_token_hint": {raw}, "post_logout_redirect_uri": {rpLoggedOut}}.Encode())
	wantStatus(t, page, http.StatusOK)
	if rp := page.Header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Errorf("Referrer-Policy %q on the logout page, want no-referrer", rp)
	}
	if want := []string{"GET " + oauth.EndSessionPath}; !slices.Equal(kept, want) {
		t.Fatalf("kept out of the access log: %v, want %v", kept, want)
	}
	kept = nil
	wantStatus(t, b.submit(page, oauth.EndSessionPath, url.Values{"decision": {"sign_out"}}), http.StatusFound)
	wantStatus(t, f.signedIn("alice").get(oauth.EndSessionPath), http.StatusOK)
	if len(kept) != 0 {
		t.Fatalf("kept out of the access log: %v, want nothing", kept)
	}
}

// TestOIDCKeyRotationWhileTokensLive: a rotated key is published before it
// signs; ID tokens signed by the old key still verify afterwards.
func TestOIDCKeyRotationWhileTokensLive(t *testing.T) {
	f := newOIDCFixture(t, func(o *oauth.Options) { o.KeyPublishAhead = time.Second })
	c := f.newRP(oauth.ClientSpec{})
	_, first, raw1 := c.signInFlow(f.browser(), "alice")
	kid := func(raw string) string {
		var h struct{ Kid string }
		b, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
		_ = json.Unmarshal(b, &h)
		return h.Kid
	}
	keys, err := grants.Of(f.store).RotateSigningKey(context.Background(), grants.KeyPolicy{Rotation: oauth.DefaultKeyRotation, PublishAhead: time.Second, Retain: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys.Published) != 2 || keys.Signer.ID != kid(raw1) {
		t.Fatalf("after rotation: %d keys published, signer %s (was %s)", len(keys.Published), keys.Signer.ID, kid(raw1))
	}
	var jwks struct{ Keys []struct{ Kid, Alg string } }
	_ = json.Unmarshal([]byte(f.request(http.MethodGet, oauth.JWKSPath, "", nil).body), &jwks)
	rsa := 0
	for _, k := range jwks.Keys {
		if k.Alg == "RS256" {
			rsa++
		}
	}
	if rsa != 2 || len(jwks.Keys) != 4 {
		t.Fatalf("the successor is not published ahead: %d RSA keys of %d", rsa, len(jwks.Keys))
	}
	// The successor signs once its second of publication ahead has
	// passed; a minute is only a backstop for a loaded machine. A sign-in
	// every 1.5 s keeps a minute of them under the authorize limit (60 a
	// minute).
	var raw2 string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(1500 * time.Millisecond) {
		if _, _, raw2 = c.signInFlow(f.browser(), "alice"); kid(raw2) != kid(raw1) {
			break
		}
	}
	if kid(raw2) == kid(raw1) {
		t.Fatal("the successor never signed")
	}
	// A relying party that met the new key verifies both tokens.
	fresh := oidc.NewVerifier(c.provider.Endpoint().AuthURL[:strings.Index(c.provider.Endpoint().AuthURL, oauth.AuthorizePath)]+"/",
		oidc.NewRemoteKeySet(context.Background(), f.ts.URL+oauth.JWKSPath), &oidc.Config{ClientID: c.app.ClientID})
	for _, raw := range []string{raw2, raw1} {
		if _, err := fresh.Verify(context.Background(), raw); err != nil {
			t.Errorf("verify after rotation: %v", err)
		}
	}
	_ = first
}

// jwtKid is the kid of a compact JWS's header.
func jwtKid(raw string) string {
	var h struct{ Kid string }
	b, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	_ = json.Unmarshal(b, &h)
	return h.Kid
}

// TestOIDCIDTokenSignedWhenTheCodeIsIssued: the ID token is signed when
// the member is sent back with the code, not at the exchange: a key that
// starts signing in between does not sign it, the key that did stays in
// the JWKS, and go-oidc verifies it, at_hash included, against the access
// token the exchange issued. The next sign-in is signed by the new key.
func TestOIDCIDTokenSignedWhenTheCodeIsIssued(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	loc := c.authorize(f.browser(), "alice", url.Values{"nonce": {"n-1"}})
	before, err := grants.Of(f.store).SigningKeys(context.Background(), grants.KeyPolicy{Rotation: oauth.DefaultKeyRotation, PublishAhead: oauth.DefaultKeyPublishAhead, Retain: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// A successor that signs at once (an operator's rotation with no
	// publication ahead, as if the exchange came that much later).
	after, err := grants.Of(f.store).RotateSigningKey(context.Background(), grants.KeyPolicy{Rotation: oauth.DefaultKeyRotation, Retain: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if after.Signer.ID == before.Signer.ID {
		t.Fatal("the rotation did not change the signer")
	}
	tok, err := c.conf.Exchange(context.Background(), loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if jwtKid(raw) != before.Signer.ID {
		t.Fatalf("the ID token is signed by %s, not by the key signing when the code was issued (%s)", jwtKid(raw), before.Signer.ID)
	}
	idt, err := c.verifier.Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := idt.VerifyAccessToken(tok.AccessToken); err != nil || idt.Nonce != "n-1" {
		t.Fatalf("at_hash: %v, nonce %q", err, idt.Nonce)
	}
	ui, err := c.provider.UserInfo(context.Background(), oauth2.StaticTokenSource(tok))
	if err != nil || ui.Subject != idt.Subject {
		t.Fatalf("userinfo with the access token: %v, sub %v", err, ui)
	}
	if _, _, raw2 := c.signInFlow(f.browser(), "alice"); jwtKid(raw2) != after.Signer.ID {
		t.Fatalf("the next ID token is signed by %s, want the new key %s", jwtKid(raw2), after.Signer.ID)
	}
}

// TestOIDCIDTokenSignedAtTheExchangeWhenOld: an ID token signed with its
// code that has less than half its lifetime left when the code is
// exchanged is signed again: the relying party gets one as fresh as the
// lifetime promises, for the same access token.
func TestOIDCIDTokenSignedAtTheExchangeWhenOld(t *testing.T) {
	f := newOIDCFixture(t, func(o *oauth.Options) { o.IDTokenLifetime = 2 * time.Second })
	c := f.newRP(oauth.ClientSpec{})
	loc := c.authorize(f.browser(), "alice", url.Values{"nonce": {"n-2"}})
	issued := time.Now()
	time.Sleep(1100 * time.Millisecond)
	tok, err := c.conf.Exchange(context.Background(), loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	idt, err := c.verifier.Verify(context.Background(), tok.Extra("id_token").(string))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := idt.VerifyAccessToken(tok.AccessToken); err != nil || idt.Nonce != "n-2" {
		t.Fatalf("at_hash: %v, nonce %q", err, idt.Nonce)
	}
	if idt.IssuedAt.Unix() <= issued.Unix() {
		t.Fatalf("iat %v: the ID token signed with the code came back with %v left", idt.IssuedAt, time.Until(idt.Expiry))
	}
}

// TestOIDCIDTokenIssuerOfTheExchange: without base_url the issuer is the
// request's host; a code exchanged under another host name than the one
// it was issued under gets an ID token with the exchange's issuer (signed
// then), as before ID tokens were signed with the code.
func TestOIDCIDTokenIssuerOfTheExchange(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	loc := c.authorize(f.browser(), "alice", nil)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {rpCallback}}
	req, err := http.NewRequest(http.MethodPost, f.url(oauth.TokenPath), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "id.example"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", basic(c.app.ClientID, c.secret))
	r := do(t, http.DefaultClient, req)
	wantStatus(t, r, http.StatusOK)
	raw, _ := r.json(t)["id_token"].(string)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("id_token %q", raw)
	}
	var claims struct{ Iss string }
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(b, &claims); err != nil || claims.Iss != "http://id.example/" {
		t.Fatalf("iss %q (%v), want the exchange's http://id.example/", claims.Iss, err)
	}
}

// TestRFC8414DocumentUnchanged: the OpenID provider leaves the RFC 8414
// document as Mastodon apps have always read it, byte for byte.
func TestRFC8414DocumentUnchanged(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.BaseURL = "https://social.example" })
	r := f.request(http.MethodGet, oauth.MetadataPath, "", nil)
	if r.body != rfc8414Document {
		t.Fatalf("the RFC 8414 document changed:\n%s\nwant:\n%s", r.body, rfc8414Document)
	}
}

const rfc8414Document = `{"app_registration_endpoint":"https://social.example/api/v1/apps","authorization_endpoint":"https://social.example/oauth/authorize","code_challenge_methods_supported":["S256"],"grant_types_supported":["authorization_code","client_credentials"],"issuer":"https://social.example/","response_modes_supported":["query"],"response_types_supported":["code"],"revocation_endpoint":"https://social.example/oauth/revoke","scopes_supported":["profile","read","read:accounts","read:blocks","read:bookmarks","read:favourites","read:filters","read:follows","read:lists","read:mutes","read:notifications","read:search","read:statuses","write","write:accounts","write:blocks","write:bookmarks","write:conversations","write:favourites","write:filters","write:follows","write:lists","write:media","write:mutes","write:notifications","write:reports","write:statuses","follow","push"],"service_documentation":"https://docs.joinmastodon.org/","token_endpoint":"https://social.example/oauth/token","token_endpoint_auth_methods_supported":["client_secret_post"],"userinfo_endpoint":"https://social.example/oauth/userinfo"}`

// TestOIDCES256Client: a client registered for ES256 gets ES256 ID tokens,
// which go-oidc verifies against the JWKS (the algorithm from discovery);
// an ES256 ID token is a good logout hint.
func TestOIDCES256Client(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{IDTokenSignedResponseAlg: "ES256"})
	b := f.browser()
	_, _, raw := c.signInFlow(b, "alice")
	var header struct{ Alg, Kid string }
	h, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	if err := json.Unmarshal(h, &header); err != nil || header.Alg != "ES256" {
		t.Fatalf("header %s", h)
	}
	r := b.get(oauth.EndSessionPath + "?" + url.Values{"id_token_hint": {raw}, "post_logout_redirect_uri": {rpLoggedOut}}.Encode())
	wantStatus(t, b.submit(r, oauth.EndSessionPath, url.Values{"decision": {"sign_out"}}), http.StatusFound)
	if _, _, err := oauth.RegisterClient(context.Background(), f.store, oauth.ClientSpec{Name: "x", RedirectURIs: []string{rpCallback}, IDTokenSignedResponseAlg: "HS256"}); err == nil {
		t.Error("HS256 was accepted")
	}
}

// TestMemberSetsOwnEmailUnverified: a member's own address is unverified
// (email_verified false in the ID token); a malformed one is refused and
// changes nothing.
func TestMemberSetsOwnEmailUnverified(t *testing.T) {
	f := newOIDCFixture(t)
	b := f.signedIn("alice")
	page := b.get(oauth.EmailPath)
	wantStatus(t, page, http.StatusOK)
	wantStatus(t, b.submit(page, oauth.EmailPath, url.Values{"email": {"not an address"}}), http.StatusBadRequest)
	if m, _ := members.Of(f.store).Member(context.Background(), "alice"); m.Email != "alice@example.org" || !m.EmailVerified {
		t.Fatalf("a refused address changed the member: %q %v", m.Email, m.EmailVerified)
	}
	wantStatus(t, b.submit(page, oauth.EmailPath, url.Values{"email": {"alice@home.example"}}), http.StatusOK)
	c := f.newRP(oauth.ClientSpec{})
	_, idt, _ := c.signInFlow(b, "alice")
	var claims struct {
		Email         string `json:"email"`
		EmailVerified *bool  `json:"email_verified"`
	}
	if err := idt.Claims(&claims); err != nil || claims.Email != "alice@home.example" || claims.EmailVerified == nil || *claims.EmailVerified {
		t.Fatalf("claims after the member set an address: %+v", claims)
	}
}

// TestOIDCAMRFromTheSession: the ID token's amr says how the browser's
// session signed in (here with a passkey alone: hwk and mfa), not only
// what the member has set up.
func TestOIDCAMRFromTheSession(t *testing.T) {
	f := newOIDCFixture(t)
	c := f.newRP(oauth.ClientSpec{})
	m, err := members.Of(f.store).Member(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	id, err := members.Of(f.store).CreateSessionWith(context.Background(), m, time.Hour, members.SessionInfo{AMR: []string{"hwk", "mfa"}})
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	u, _ := url.Parse(f.ts.URL)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: account.CookieName, Value: id}})
	_, idt, _ := c.signInFlow(b, "alice")
	var claims struct {
		AMR []string `json:"amr"`
	}
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if strings.Join(claims.AMR, ",") != "hwk,mfa" {
		t.Errorf("amr %v, want [hwk mfa]", claims.AMR)
	}
}

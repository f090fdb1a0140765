package oauth_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func mustMember(t testing.TB, f *fixture, username string) *members.Member {
	t.Helper()
	m, err := members.Of(f.store).Member(t.Context(), username)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// codeFixture is a fixture with alice signed in on a browser and an app.
type codeFixture struct {
	*fixture
	b   *browser
	app credentialApplication
	cb  string
}

func newCodeFixture(t *testing.T, scopes string) *codeFixture {
	f := newFixture(t)
	f.member("alice")
	b := f.signedIn("alice")
	const cb = "https://app.example/cb"
	return &codeFixture{fixture: f, b: b, app: f.register("Tooter", cb, scopes), cb: cb}
}

// code approves a fresh authorization request for scope (and the PKCE
// challenge of verifier, if any).
func (c *codeFixture) code(scope, verifier string) string {
	c.t.Helper()
	q := authQuery(c.app, c.cb, scope, "st")
	if verifier != "" {
		q.Set("code_challenge", challenge(verifier))
		q.Set("code_challenge_method", "S256")
	}
	return c.b.approve(q)
}

// TestTokenAuthorizationCode: the code grant with the client's credentials
// in the body answers with exactly the spec's token response.
func TestTokenAuthorizationCode(t *testing.T) {
	c := newCodeFixture(t, "read write")
	before := time.Now().Unix()
	r := c.token(codeForm(c.app, c.code("read write:statuses", ""), c.cb, ""))
	wantStatus(t, r, http.StatusOK)
	body := r.json(t)
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"access_token", "created_at", "scope", "token_type"}) {
		t.Fatalf("fields %v, want exactly access_token, created_at, scope, token_type", keys)
	}
	if body["token_type"] != "Bearer" || body["scope"] != "read write:statuses" {
		t.Fatalf("token response %s", r.body)
	}
	created, ok := body["created_at"].(float64)
	if !ok || int64(created) < before-1 || int64(created) > time.Now().Unix()+1 || created != float64(int64(created)) {
		t.Fatalf("created_at %v is not the Unix second of issue", body["created_at"])
	}
	if tok, _ := body["access_token"].(string); len(tok) < 40 {
		t.Fatalf("access_token %q", tok)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", r.Header.Get("Cache-Control"))
	}
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, body["access_token"].(string)), http.StatusOK)
}

// TestTokenAuthorizationCodeWithPKCE: with PKCE the verifier of the same
// attempt is needed, and the client secret still is.
func TestTokenAuthorizationCodeWithPKCE(t *testing.T) {
	c := newCodeFixture(t, "read")
	v1 := strings.Repeat("a", 43) + "-._~"
	v2 := strings.Repeat("b", 128)
	cases := []struct {
		name   string
		form   func(code string) url.Values
		status int
		err    string
	}{
		{"right verifier", func(code string) url.Values { return codeForm(c.app, code, c.cb, v1) }, 200, ""},
		{"verifier of another attempt", func(code string) url.Values { return codeForm(c.app, code, c.cb, v2) }, 400, "invalid_grant"},
		{"no verifier", func(code string) url.Values { return codeForm(c.app, code, c.cb, "") }, 400, "invalid_request"},
		{"challenge as verifier", func(code string) url.Values { return codeForm(c.app, code, c.cb, challenge(v1)) }, 400, "invalid_grant"},
		{"no client secret", func(code string) url.Values {
			f := codeForm(c.app, code, c.cb, v1)
			f.Del("client_secret")
			return f
		}, 401, "invalid_client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.token(tc.form(c.code("read", v1)))
			if tc.err == "" {
				wantStatus(t, r, tc.status)
				return
			}
			wantOAuthError(t, r, tc.err)
		})
	}
	// A verifier sent for a code issued without a challenge is refused.
	wantOAuthError(t, c.token(codeForm(c.app, c.code("read", ""), c.cb, v1)), "invalid_grant")
}

// TestTokenRedirectURIMustMatchExactly: the redirect URI of the exchange is
// the one of the authorization, byte for byte.
func TestTokenRedirectURIMustMatchExactly(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	b := f.signedIn("alice")
	app := f.register("Tooter", "https://app.example/cb\nhttps://app.example/other", "read")
	for _, uri := range []string{"https://app.example/other", "https://app.example/cb/", "https://app.example/cb?", "https://APP.example/cb", "https://app.example:443/cb", ""} {
		code := b.approve(authQuery(app, "https://app.example/cb", "read", "s"))
		r := f.token(codeForm(app, code, uri, ""))
		if uri == "" {
			wantOAuthError(t, r, "invalid_request")
			continue
		}
		wantOAuthError(t, r, "invalid_grant")
	}
}

// TestTokenCodeSingleUse: a code works once; a second use is invalid_grant
// and revokes the token issued from it.
func TestTokenCodeSingleUse(t *testing.T) {
	c := newCodeFixture(t, "read")
	code := c.code("read", "")
	tok := c.exchange(c.app, code, c.cb, "")
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)

	wantOAuthError(t, c.token(codeForm(c.app, code, c.cb, "")), "invalid_grant")
	wantJSONError(t, c.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnauthorized, "The access token is invalid")
	// Once more: still refused.
	wantOAuthError(t, c.token(codeForm(c.app, code, c.cb, "")), "invalid_grant")

	// Other tokens of the member and app are untouched.
	other := c.exchange(c.app, c.code("read", ""), c.cb, "")
	wantOAuthError(t, c.token(codeForm(c.app, code, c.cb, "")), "invalid_grant")
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, other), http.StatusOK)
}

// TestTokenFailedExchangeConsumesCode: after a failed exchange the code is
// gone (the spec: a new authorization attempt is needed).
func TestTokenFailedExchangeConsumesCode(t *testing.T) {
	c := newCodeFixture(t, "read")
	code := c.code("read", "")
	wantOAuthError(t, c.token(codeForm(c.app, code, "https://app.example/wrong", "")), "invalid_grant")
	wantOAuthError(t, c.token(codeForm(c.app, code, c.cb, "")), "invalid_grant")
}

// TestTokenCodeOfAnotherClient: a code is only good for the app it was
// issued to, and the other app's attempt burns it.
func TestTokenCodeOfAnotherClient(t *testing.T) {
	c := newCodeFixture(t, "read")
	other := c.register("Other", c.cb, "read")
	code := c.code("read", "")
	wantOAuthError(t, c.token(codeForm(other, code, c.cb, "")), "invalid_grant")
	wantOAuthError(t, c.token(codeForm(c.app, code, c.cb, "")), "invalid_grant")
}

// TestTokenUnknownCodes: made-up, malformed and over-long codes are
// invalid_grant; a missing one invalid_request.
func TestTokenUnknownCodes(t *testing.T) {
	c := newCodeFixture(t, "read")
	for _, code := range []string{"hac_nope", "x", strings.Repeat("a", 300), "hac_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32))} {
		wantOAuthError(t, c.token(codeForm(c.app, code, c.cb, "")), "invalid_grant")
	}
	wantOAuthError(t, c.token(codeForm(c.app, "", c.cb, "")), "invalid_request")
}

// TestTokenSuspendedMemberCode: a code of a member suspended before the
// exchange gives no token.
func TestTokenSuspendedMemberCode(t *testing.T) {
	c := newCodeFixture(t, "read")
	code := c.code("read", "")
	if _, err := members.Of(c.store).SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	wantOAuthError(t, c.token(codeForm(c.app, code, c.cb, "")), "invalid_grant")
}

// TestTokenConcurrentExchangesOfOneCode: 50 simultaneous exchanges of one
// code issue exactly one token; the others are invalid_grant. They are all
// uses of one code, so the replay rule revokes the token issued.
func TestTokenConcurrentExchangesOfOneCode(t *testing.T) {
	c := newCodeFixture(t, "read")
	code := c.code("read", "")
	form := codeForm(c.app, code, c.cb, "").Encode()
	const n = 50
	var wg sync.WaitGroup
	results := make([]resp, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest(http.MethodPost, c.url(oauth.TokenPath), strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			results[i] = resp{res, string(body)}
		})
	}
	close(start)
	wg.Wait()
	var tokens []string
	for _, r := range results {
		if r.Response == nil {
			t.Fatal("a request failed")
		}
		switch r.StatusCode {
		case http.StatusOK:
			tokens = append(tokens, r.json(t)["access_token"].(string))
		default:
			wantOAuthError(t, r, "invalid_grant")
		}
	}
	if len(tokens) != 1 {
		t.Fatalf("%d tokens issued from one code, want exactly 1", len(tokens))
	}
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, tokens[0]), http.StatusUnauthorized)
}

// TestTokenClientCredentials: an app token has no member; its scopes
// default to the registered ones and may be narrowed, never widened.
func TestTokenClientCredentials(t *testing.T) {
	f := newFixture(t)
	app := f.register("Bot", "https://bot.example/cb", "read write follow push")
	cases := []struct {
		name, scope, want, err string
	}{
		{"default is registered", "", "read write follow push", ""},
		{"narrower", "read", "read", ""},
		{"granular under broad", "read:statuses write:media", "read:statuses write:media", ""},
		{"not registered", "profile", "", "invalid_scope"},
		{"unknown", "read admin:read", "", "invalid_scope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"grant_type": {"client_credentials"}, "client_id": {app.ClientID}, "client_secret": {app.ClientSecret}}
			if tc.scope != "" {
				form.Set("scope", tc.scope)
			}
			r := f.token(form)
			if tc.err != "" {
				wantOAuthError(t, r, tc.err)
				return
			}
			wantStatus(t, r, http.StatusOK)
			body := r.json(t)
			if body["scope"] != tc.want || body["token_type"] != "Bearer" {
				t.Fatalf("token %s", r.body)
			}
			if _, ok := body["refresh_token"]; ok {
				t.Fatal("refresh_token in the response")
			}
			tok := body["access_token"].(string)
			if strings.Contains(" "+tc.want+" ", " read ") {
				wantJSONError(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnprocessableEntity, "This method requires an authenticated user")
			} else {
				// The scope check comes first, as in Mastodon.
				wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusForbidden)
			}
			wantStatus(t, f.getWithToken(oauth.AppsVerifyPath, tok), http.StatusOK)
		})
	}
}

// TestTokenClientCredentialsKeepsTheNewestAppTokens: an app that asks
// for more app tokens than grants.MaxAppTokens keeps the newest ones; the
// oldest answers 401 as a revoked token does.
func TestTokenClientCredentialsKeepsTheNewestAppTokens(t *testing.T) {
	f := newFixture(t)
	app := f.register("Bot", "https://bot.example/cb", "read")
	var toks []string
	for range grants.MaxAppTokens + 1 {
		toks = append(toks, f.appToken(app, ""))
	}
	wantJSONError(t, f.getWithToken(oauth.AppsVerifyPath, toks[0]), http.StatusUnauthorized, "The access token is invalid")
	for _, tok := range toks[1:] {
		wantStatus(t, f.getWithToken(oauth.AppsVerifyPath, tok), http.StatusOK)
	}
}

// TestTokenUnsupportedGrants: password, refresh_token and anything else
// are unsupported_grant_type.
func TestTokenUnsupportedGrants(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	app := f.register("Tooter", "https://app.example/cb", "read")
	for _, grant := range []string{"password", "refresh_token", "implicit", "urn:ietf:params:oauth:grant-type:device_code", ""} {
		t.Run(grant, func(t *testing.T) {
			form := url.Values{"client_id": {app.ClientID}, "client_secret": {app.ClientSecret},
				"username": {"alice"}, "password": {password}, "refresh_token": {"hat_x"}}
			if grant != "" {
				form.Set("grant_type", grant)
			}
			wantOAuthError(t, f.token(form), "unsupported_grant_type")
		})
	}
}

// TestTokenClientAuthentication: the client authenticates with its id and
// secret in the body only; HTTP Basic, missing, wrong or foreign
// credentials are invalid_client (401 with WWW-Authenticate).
func TestTokenClientAuthentication(t *testing.T) {
	f := newFixture(t)
	app := f.register("Tooter", "https://app.example/cb", "read")
	other := f.register("Other", "https://app.example/cb", "read")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(app.ClientID)+":"+url.QueryEscape(app.ClientSecret)))
	cc := func(id, secret string) url.Values {
		form := url.Values{"grant_type": {"client_credentials"}}
		if id != "" {
			form.Set("client_id", id)
		}
		if secret != "" {
			form.Set("client_secret", secret)
		}
		return form
	}
	cases := []struct {
		name   string
		form   url.Values
		header []string
	}{
		{"basic only", cc("", ""), []string{"Authorization", basic}},
		{"basic and body", cc(app.ClientID, app.ClientSecret), []string{"Authorization", basic}},
		{"no credentials", cc("", ""), nil},
		{"no secret", cc(app.ClientID, ""), nil},
		{"wrong secret", cc(app.ClientID, app.ClientSecret+"x"), nil},
		{"secret of another app", cc(app.ClientID, other.ClientSecret), nil},
		{"unknown client", cc("nope", app.ClientSecret), nil},
		{"secret in the query", func() url.Values { return cc(app.ClientID, "") }(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := oauth.TokenPath
			if tc.name == "secret in the query" {
				path += "?client_secret=" + url.QueryEscape(app.ClientSecret)
			}
			r := f.postForm(path, tc.form, tc.header...)
			wantOAuthError(t, r, "invalid_client")
			if !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_client"`) {
				t.Errorf("WWW-Authenticate %q", r.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// The same credentials in the body work.
	wantStatus(t, f.token(cc(app.ClientID, app.ClientSecret)), http.StatusOK)
}

// TestTokenBadRequests: malformed requests are invalid_request in RFC 6749
// JSON, 400, never a 500.
func TestTokenBadRequests(t *testing.T) {
	f := newFixture(t)
	app := f.register("Tooter", "https://app.example/cb", "read")
	cases := []struct {
		name, contentType, body string
		err                     string
	}{
		{"parameter twice", "application/x-www-form-urlencoded", "grant_type=client_credentials&grant_type=client_credentials&client_id=" + app.ClientID + "&client_secret=" + app.ClientSecret, "invalid_request"},
		{"broken form", "application/x-www-form-urlencoded", "grant_type=%zz", "invalid_request"},
		{"broken json", "application/json", `{"grant_type":`, "invalid_request"},
		{"json number", "application/json", `{"grant_type":1}`, "invalid_request"},
		{"parameter too long", "application/x-www-form-urlencoded", "grant_type=client_credentials&client_id=" + strings.Repeat("a", 3000), "invalid_request"},
		{"json grant", "application/json", `{"grant_type":"client_credentials","client_id":"` + app.ClientID + `","client_secret":"` + app.ClientSecret + `"}`, ""},
		{"empty body", "application/x-www-form-urlencoded", "", "unsupported_grant_type"},
		{"multipart", "multipart/form-data; boundary=b", "--b--\r\n", "unsupported_grant_type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.request(http.MethodPost, oauth.TokenPath, tc.contentType, strings.NewReader(tc.body))
			if tc.err == "" {
				wantStatus(t, r, http.StatusOK)
				return
			}
			wantOAuthError(t, r, tc.err)
		})
	}
	r := f.request(http.MethodGet, oauth.TokenPath, "", nil)
	wantStatus(t, r, http.StatusMethodNotAllowed)
}

// TestTokenEndpointRateLimited: the token endpoint answers 429 with
// Retry-After beyond its per-IP limit.
func TestTokenEndpointRateLimited(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.TokenLimit = 3 })
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"x"}, "client_secret": {"y"}}
	for range 3 {
		wantOAuthError(t, f.token(form), "invalid_client")
	}
	r := f.token(form)
	wantStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	wantStatus(t, f.postForm(oauth.RevokePath, form), http.StatusTooManyRequests)
}

// TestRevoke: revocation answers 200 {} for live, unknown and already
// revoked tokens, and only ever revokes the calling client's tokens.
func TestRevoke(t *testing.T) {
	c := newCodeFixture(t, "read")
	other := c.register("Other", c.cb, "read")
	mine := c.exchange(c.app, c.code("read", ""), c.cb, "")
	appTok := c.appToken(c.app, "")
	theirs := c.appToken(other, "")
	revoke := func(app credentialApplication, token string) resp {
		form := url.Values{"client_id": {app.ClientID}, "client_secret": {app.ClientSecret}}
		if token != "" {
			form.Set("token", token)
		}
		r := c.postForm(oauth.RevokePath, form)
		wantStatus(t, r, http.StatusOK)
		if strings.TrimSpace(r.body) != "{}" {
			t.Fatalf("revoke answered %q, want {}", r.body)
		}
		return r
	}
	// Another client can't revoke this one's token.
	revoke(other, mine)
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, mine), http.StatusOK)

	revoke(c.app, mine)
	wantJSONError(t, c.getWithToken(oauth.VerifyCredentialsPath, mine), http.StatusUnauthorized, "The access token is invalid")
	revoke(c.app, mine)          // already revoked
	revoke(c.app, "hat_unknown") // unknown
	revoke(c.app, "")            // none
	revoke(c.app, strings.Repeat("x", 1000))

	// The client's app token goes; the other client's does not.
	revoke(c.app, appTok)
	wantStatus(t, c.getWithToken(oauth.AppsVerifyPath, appTok), http.StatusUnauthorized)
	wantStatus(t, c.getWithToken(oauth.AppsVerifyPath, theirs), http.StatusOK)

	// Client authentication is still required.
	wantOAuthError(t, c.postForm(oauth.RevokePath, url.Values{"client_id": {c.app.ClientID}, "token": {theirs}}), "invalid_client")
	wantOAuthError(t, c.postForm(oauth.RevokePath, url.Values{"client_id": {c.app.ClientID}, "client_secret": {c.app.ClientSecret}, "token": {theirs}},
		"Authorization", "Basic eDp5"), "invalid_client")
	wantStatus(t, c.getWithToken(oauth.AppsVerifyPath, theirs), http.StatusOK)
}

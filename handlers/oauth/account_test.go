package oauth_test

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestVerifyCredentialsReturnsCredentialAccount: a member token with
// profile or read gets Mastodon's CredentialAccount of its member.
func TestVerifyCredentialsReturnsCredentialAccount(t *testing.T) {
	c := newCodeFixture(t, "read write profile")
	alice := mustMember(t, c.fixture, "alice")
	for _, scope := range []string{"read", "profile", "read:accounts", "profile write:statuses"} {
		t.Run(scope, func(t *testing.T) {
			tok := c.exchange(c.app, c.code(scope, ""), c.cb, "")
			r := c.getWithToken(oauth.VerifyCredentialsPath, tok)
			wantStatus(t, r, http.StatusOK)
			if cc := r.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
				t.Errorf("Cache-Control %q", cc)
			}
			a := r.json(t)
			for _, k := range []string{"id", "username", "acct", "display_name", "locked", "bot", "created_at", "note", "url", "avatar",
				"avatar_static", "header", "header_static", "followers_count", "following_count", "statuses_count", "emojis", "fields", "source"} {
				if _, ok := a[k]; !ok {
					t.Errorf("field %s missing", k)
				}
			}
			if a["id"] != alice.ID || a["username"] != "alice" || a["acct"] != "alice" || a["display_name"] != "Display alice" {
				t.Errorf("account %s", r.body)
			}
			if a["url"] != c.ts.URL+"/@alice" || !strings.HasPrefix(a["avatar"].(string), c.ts.URL+"/") {
				t.Errorf("url %v, avatar %v", a["url"], a["avatar"])
			}
			if _, err := time.Parse(time.RFC3339, a["created_at"].(string)); err != nil {
				t.Errorf("created_at %v: %v", a["created_at"], err)
			}
			src, ok := a["source"].(map[string]any)
			if !ok || src["privacy"] == nil || src["note"] == nil {
				t.Errorf("source %v", a["source"])
			}
		})
	}
}

// TestVerifyCredentialsInvalidTokens: missing, unknown and revoked tokens
// are 401 with Mastodon's body and a Bearer challenge.
func TestVerifyCredentialsInvalidTokens(t *testing.T) {
	c := newCodeFixture(t, "read")
	revoked := c.exchange(c.app, c.code("read", ""), c.cb, "")
	if err := grants.Of(c.store).RevokeToken(t.Context(), c.app.ClientID, revoked); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"no header":    "",
		"unknown":      "Bearer hat_unknown",
		"revoked":      "Bearer " + revoked,
		"empty bearer": "Bearer ",
		"basic":        "Basic eDp5",
		"long":         "Bearer " + strings.Repeat("x", 5000),
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			var hdr []string
			if h != "" {
				hdr = []string{"Authorization", h}
			}
			r := c.request(http.MethodGet, oauth.VerifyCredentialsPath, "", nil, hdr...)
			wantJSONError(t, r, http.StatusUnauthorized, "The access token is invalid")
			if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("WWW-Authenticate %q", r.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// A token in the query string is not accepted (tokens stay out of URLs).
	live := c.exchange(c.app, c.code("read", ""), c.cb, "")
	wantStatus(t, c.request(http.MethodGet, oauth.VerifyCredentialsPath+"?access_token="+live, "", nil), http.StatusUnauthorized)
}

// TestVerifyCredentialsOutsideScopes: a token without profile or a read
// scope covering accounts is 403 with Mastodon's scope error.
func TestVerifyCredentialsOutsideScopes(t *testing.T) {
	c := newCodeFixture(t, "read write follow push")
	for _, scope := range []string{"write:statuses", "write", "read:statuses", "push", "follow"} {
		t.Run(scope, func(t *testing.T) {
			tok := c.exchange(c.app, c.code(scope, ""), c.cb, "")
			wantJSONError(t, c.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusForbidden, "This action is outside the authorized scopes")
		})
	}
}

// TestVerifyCredentialsSuspendedMember: a suspended member's tokens are
// refused with 403 (and work again once the suspension is lifted).
func TestVerifyCredentialsSuspendedMember(t *testing.T) {
	c := newCodeFixture(t, "read")
	tok := c.exchange(c.app, c.code("read", ""), c.cb, "")
	if _, err := members.Of(c.store).SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	r := c.getWithToken(oauth.VerifyCredentialsPath, tok)
	wantStatus(t, r, http.StatusForbidden)
	if e, _ := r.json(t)["error"].(string); e == "" {
		t.Fatalf("403 without an error field: %s", r.body)
	}
	wantStatus(t, c.getWithToken(oauth.AppsVerifyPath, tok), http.StatusForbidden)
	if _, err := members.Of(c.store).SetSuspended(t.Context(), "alice", false); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
}

// TestVerifyCredentialsDeletedMember: a deleted member's tokens are gone.
func TestVerifyCredentialsDeletedMember(t *testing.T) {
	c := newCodeFixture(t, "read")
	tok := c.exchange(c.app, c.code("read", ""), c.cb, "")
	if err := members.Of(c.store).DeleteMember(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnauthorized)
}

// TestVerifyCredentialsAppToken: an app token has no user: 422.
func TestVerifyCredentialsAppToken(t *testing.T) {
	f := newFixture(t)
	app := f.register("Bot", "https://bot.example/cb", "read")
	wantJSONError(t, f.getWithToken(oauth.VerifyCredentialsPath, f.appToken(app, "")), http.StatusUnprocessableEntity, "This method requires an authenticated user")
}

// TestAppsVerifyCredentials: any valid token of an app shows the app
// (without its secret); invalid tokens are 401.
func TestAppsVerifyCredentials(t *testing.T) {
	c := newCodeFixture(t, "read write")
	for _, tok := range []string{c.appToken(c.app, "write"), c.exchange(c.app, c.code("write:media", ""), c.cb, "")} {
		r := c.getWithToken(oauth.AppsVerifyPath, tok)
		wantStatus(t, r, http.StatusOK)
		a := r.json(t)
		if a["name"] != "Tooter" || a["id"] != c.app.ID || !reflect.DeepEqual(a["scopes"], []any{"read", "write"}) || a["redirect_uri"] != c.cb {
			t.Fatalf("application %s", r.body)
		}
		if strings.Contains(r.body, c.app.ClientSecret) || strings.Contains(r.body, "client_secret") {
			t.Fatalf("the secret is shown again: %s", r.body)
		}
	}
	wantJSONError(t, c.getWithToken(oauth.AppsVerifyPath, "hat_nope"), http.StatusUnauthorized, "The access token is invalid")
}

// TestInstanceEndpoints: the minimal v1 and v2 instance documents clients
// probe before signing in, with a Mastodon 4.x version.
func TestInstanceEndpoints(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) {
		o.InstanceTitle, o.ContactEmail, o.AccountDomain = "My Hearth", "admin@example.com", "example.com"
	})
	f.member("alice")
	v1 := f.request(http.MethodGet, oauth.InstanceV1Path, "", nil)
	wantStatus(t, v1, http.StatusOK)
	a := v1.json(t)
	if a["uri"] != "example.com" || a["title"] != "My Hearth" || a["email"] != "admin@example.com" || !strings.HasPrefix(a["version"].(string), "4.4.") {
		t.Fatalf("v1 instance %s", v1.body)
	}
	if st, _ := a["stats"].(map[string]any); st["user_count"] != 1.0 {
		t.Errorf("stats %v", a["stats"])
	}
	v2 := f.request(http.MethodGet, oauth.InstanceV2Path, "", nil)
	wantStatus(t, v2, http.StatusOK)
	b := v2.json(t)
	if b["domain"] != "example.com" || b["title"] != "My Hearth" || !strings.HasPrefix(b["version"].(string), "4.4.") {
		t.Fatalf("v2 instance %s", v2.body)
	}
	for _, k := range []string{"configuration", "registrations", "contact", "usage", "api_versions"} {
		if _, ok := b[k]; !ok {
			t.Errorf("v2 lacks %s", k)
		}
	}
	// The count follows sign-ups and deletions (members' counter).
	f.member("bob")
	f.member("cat")
	if err := members.Of(f.store).DeleteMember(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.request(http.MethodGet, oauth.InstanceV1Path, "", nil).json(t)["stats"].(map[string]any); st["user_count"] != 2.0 {
		t.Errorf("after a deletion, stats %v", st)
	}
	usage, _ := f.request(http.MethodGet, oauth.InstanceV2Path, "", nil).json(t)["usage"].(map[string]any)
	if users, _ := usage["users"].(map[string]any); users["active_month"] != 2.0 {
		t.Errorf("after a deletion, usage %v", usage)
	}
	// Without options, the domain is the request's host.
	g := newFixture(t)
	if got := g.request(http.MethodGet, oauth.InstanceV2Path, "", nil).json(t)["domain"]; got != loopbackIP(g.ts) {
		t.Errorf("default domain %v, want %s", got, loopbackIP(g.ts))
	}
}

// TestMetadataDocument: RFC 8414 metadata advertises only what the server
// supports: client_secret_post, S256, the two grants and the scopes.
func TestMetadataDocument(t *testing.T) {
	for _, base := range []string{"", "https://social.example"} {
		f := newFixture(t, func(o *oauth.Options) { o.BaseURL = base })
		want := base
		if want == "" {
			want = f.ts.URL
		}
		r := f.request(http.MethodGet, oauth.MetadataPath, "", nil)
		wantStatus(t, r, http.StatusOK)
		m := r.json(t)
		strs := func(k string) []string {
			var out []string
			list, _ := m[k].([]any)
			for _, v := range list {
				out = append(out, v.(string))
			}
			return out
		}
		if m["issuer"] != want+"/" || m["authorization_endpoint"] != want+oauth.AuthorizePath || m["token_endpoint"] != want+oauth.TokenPath ||
			m["revocation_endpoint"] != want+oauth.RevokePath || m["app_registration_endpoint"] != want+oauth.AppsPath {
			t.Errorf("endpoints %s", r.body)
		}
		for k, v := range map[string][]string{
			"token_endpoint_auth_methods_supported": {"client_secret_post"},
			"code_challenge_methods_supported":      {"S256"},
			"grant_types_supported":                 {"authorization_code", "client_credentials"},
			"response_types_supported":              {"code"},
			"scopes_supported":                      grants.Scopes,
		} {
			if got := strs(k); !slices.Equal(got, v) {
				t.Errorf("%s = %v, want %v", k, got, v)
			}
		}
		for _, s := range []string{"profile", "read", "write", "read:statuses", "write:statuses", "write:media", "follow", "push"} {
			if !slices.Contains(strs("scopes_supported"), s) {
				t.Errorf("scope %s not advertised", s)
			}
		}
	}
}

// TestCORS: browser-based clients on other origins can call the API
// endpoints, as on Mastodon; the authorization page is not for them.
func TestCORS(t *testing.T) {
	f := newFixture(t)
	r := f.request(http.MethodOptions, oauth.TokenPath, "", nil, "Origin", "https://client.example", "Access-Control-Request-Method", "POST")
	wantStatus(t, r, http.StatusOK)
	if r.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight headers %v", r.Header)
	}
	r = f.request(http.MethodGet, oauth.InstanceV2Path, "", nil, "Origin", "https://client.example")
	if r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("no CORS on the instance endpoint")
	}
	r = f.request(http.MethodGet, oauth.AuthorizePath, "", nil, "Origin", "https://client.example")
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("the authorization page allows CORS")
	}
}

// TestPlaceholderImages: the avatar and header URLs of accounts answer.
func TestPlaceholderImages(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{oauth.MissingAvatarPath, oauth.MissingHeaderPath} {
		r := f.request(http.MethodGet, p, "", nil)
		wantStatus(t, r, http.StatusOK)
		if r.Header.Get("Content-Type") != "image/png" {
			t.Errorf("%s: Content-Type %q", p, r.Header.Get("Content-Type"))
		}
	}
}

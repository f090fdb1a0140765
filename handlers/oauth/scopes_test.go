package oauth_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

// TestScopesRequestedMustBeCoveredByRegistration: the spec's scope rules,
// at both grants: broad scopes cover their granular scopes, a granular
// scope covers only itself, requested scopes must be registered (or
// covered), and unknown scopes are invalid_scope.
func TestScopesRequestedMustBeCoveredByRegistration(t *testing.T) {
	cases := []struct {
		name, registered, requested string
		ok                          bool
	}{
		{"broad read covers read:statuses", "read", "read:statuses", true},
		{"broad write covers write:media", "write", "write:media write:statuses", true},
		{"broad read does not cover write", "read", "write:statuses", false},
		{"granular covers itself", "read:statuses", "read:statuses", true},
		{"granular does not cover broad", "read:statuses", "read", false},
		{"granular does not cover its sibling", "write:statuses", "write:media", false},
		{"profile is its own scope", "read", "profile", false},
		{"profile registered", "profile read:statuses", "profile", true},
		{"subset of registered", "read write follow push", "read push", true},
		{"mastodon defaults", "read write follow push", "read write follow push", true},
		{"follow covers relationships", "follow", "read:follows write:blocks", true},
		{"push not registered", "read write follow", "push", false},
		{"unknown scope", "read write follow push", "read admin:read", false},
		{"made-up scope", "read", "read:everything", false},
		{"case matters", "read", "READ", false},
		{"duplicates are one", "read", "read read", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.member("alice")
			app := f.register("App", "https://app.example/cb", tc.registered)

			r := f.token(url.Values{"grant_type": {"client_credentials"}, "client_id": {app.ClientID}, "client_secret": {app.ClientSecret}, "scope": {tc.requested}})
			if tc.ok {
				wantStatus(t, r, http.StatusOK)
			} else {
				wantOAuthError(t, r, "invalid_scope")
			}

			b := f.signedIn("alice")
			q := authQuery(app, "https://app.example/cb", tc.requested, "st")
			if tc.ok {
				f.exchange(app, b.approve(q), "https://app.example/cb", "")
				return
			}
			res := b.get(oauth.AuthorizePath + "?" + q.Encode())
			wantStatus(t, res, http.StatusFound)
			loc, _ := res.Location()
			if loc.Query().Get("error") != "invalid_scope" || loc.Query().Get("state") != "st" {
				t.Fatalf("redirected to %s, want invalid_scope", loc)
			}
		})
	}
}

// TestScopesGrantedAreTheRequested: the token carries the requested scopes
// (not all registered ones) and they are enforced.
func TestScopesGrantedAreTheRequested(t *testing.T) {
	c := newCodeFixture(t, "read write follow push")
	r := c.token(codeForm(c.app, c.code("read write follow push", ""), c.cb, ""))
	wantStatus(t, r, http.StatusOK)
	if got := r.json(t)["scope"]; got != "read write follow push" {
		t.Fatalf("scope %v", got)
	}
	narrow := c.exchange(c.app, c.code("write:statuses", ""), c.cb, "")
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, narrow), http.StatusForbidden)
}

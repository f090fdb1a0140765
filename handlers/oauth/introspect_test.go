package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestOIDCIntrospectionOfRefreshTokensNoLongerUsable: a resource server
// introspecting (RFC 7662) a refresh token its client can no longer use
// gets active false, as the refresh grant refuses it: once the client is
// removed (it cannot authenticate any more), and once the member's
// credentials changed since the sign-in (the security stamp: here the
// operator's password reset; invalid_grant).
func TestOIDCIntrospectionOfRefreshTokensNoLongerUsable(t *testing.T) {
	f := newOIDCFixture(t)
	ctx := context.Background()
	resource := f.newRP(oauth.ClientSpec{Name: "Wiki"})
	active := func(token string) any {
		t.Helper()
		r := f.postForm(oauth.IntrospectPath, url.Values{"token": {token}}, "Authorization", basic(resource.app.ClientID, resource.secret))
		wantStatus(t, r, http.StatusOK)
		return r.json(t)["active"]
	}
	refresh := func(c *rp, token string) resp {
		return f.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}}, "Authorization", basic(c.app.ClientID, c.secret))
	}

	removed := f.newRP(oauth.ClientSpec{Name: "Old app"})
	tok, _, _ := removed.signInFlow(f.browser(), "alice")
	if a := active(tok.RefreshToken); a != true {
		t.Fatalf("a live refresh token: active %v", a)
	}
	if err := grants.Of(f.store).DeleteClient(ctx, removed.app.ClientID); err != nil {
		t.Fatal(err)
	}
	if r := refresh(removed, tok.RefreshToken); (r.StatusCode != http.StatusBadRequest && r.StatusCode != http.StatusUnauthorized) || r.json(t)["access_token"] != nil {
		t.Fatalf("a removed client refreshed: HTTP %d %s", r.StatusCode, r.body)
	}
	if a := active(tok.RefreshToken); a != false {
		t.Errorf("the refresh token of a removed client: active %v", a)
	}

	c := f.newRP(oauth.ClientSpec{})
	tok, _, _ = c.signInFlow(f.browser(), "alice")
	if a := active(tok.RefreshToken); a != true {
		t.Fatalf("a live refresh token: active %v", a)
	}
	if err := members.Of(f.store).SetPassword(ctx, "alice", "a new password, set by the operator"); err != nil {
		t.Fatal(err)
	}
	if a := active(tok.RefreshToken); a != false {
		t.Errorf("a refresh token from before a password reset: active %v", a)
	}
	wantOAuthError(t, refresh(c, tok.RefreshToken), "invalid_grant")
}

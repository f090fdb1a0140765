package oauth_test

import (
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestCodeGrantedBeforeAPasswordChangeIsRefused: an authorization code a
// member granted before the password changed (the change ended the
// session that granted it) gets invalid_grant at the token endpoint. Every
// change of credentials: storage/grants TestCodeGrantedBeforeCredentialChange.
func TestCodeGrantedBeforeAPasswordChangeIsRefused(t *testing.T) {
	c := newCodeFixture(t, "read")
	code := c.code("read", "")
	m, err := members.Of(c.store).Member(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := members.Of(c.store).SetPassword(t.Context(), m.Username, "an entirely new password"); err != nil {
		t.Fatal(err)
	}
	wantOAuthError(t, c.token(codeForm(c.app, code, c.cb, "")), "invalid_grant")
}

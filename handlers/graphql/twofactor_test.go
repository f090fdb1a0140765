package graphql_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/storage"
)

// signIn has no field for a second factor (Inboxt's SignInInput), so a
// member with two-factor sign-in is refused there, with no session, and
// signs in on the site's page instead.
func TestSignInRefusesTwoFactorMembers(t *testing.T) {
	e := newEnv(t, graphql.Options{})
	const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	if err := e.store.StartTwoFactorSetup(e.member.ID, secret); err != nil {
		t.Fatal(err)
	}
	code, _ := storage.TOTPCode(secret, time.Now())
	if _, err := e.store.ConfirmTwoFactor(e.member.ID, code); err != nil {
		t.Fatal(err)
	}
	const signIn = `mutation signIn($data: SignInInput!) { signIn(data: $data) { success } }`
	r := e.wantError("", signIn, map[string]any{"data": map[string]any{"emailAddress": "alice", "password": "correct horse battery"}}, 200, "FORBIDDEN")
	if !strings.Contains(r.Errors[0].Message, "two-factor sign-in") || strings.Contains(r.Header.Get("Set-Cookie"), "hearth_session=") {
		t.Fatalf("%+v, Set-Cookie %q", r.Errors, r.Header.Get("Set-Cookie"))
	}
	// A wrong password still answers as for everyone.
	r = e.wantError("", signIn, map[string]any{"data": map[string]any{"emailAddress": "alice", "password": "wrong password"}}, 200, "BAD_REQUEST")
	if r.Errors[0].Message != "Invalid email address or password" {
		t.Fatalf("%+v", r.Errors)
	}
}

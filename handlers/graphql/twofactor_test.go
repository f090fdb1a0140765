package graphql_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/members"
)

// withTwoFactor turns on two-factor sign-in for the env's member, as the
// account page does (a secret, then a code of it).
func withTwoFactor(t *testing.T, e *env) {
	t.Helper()
	const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	if err := members.Of(e.store).StartTwoFactorSetup(t.Context(), e.member.ID, secret); err != nil {
		t.Fatal(err)
	}
	code, _ := members.TOTPCode(secret, time.Now())
	if _, err := members.Of(e.store).ConfirmTwoFactor(t.Context(), e.member.ID, code, ""); err != nil {
		t.Fatal(err)
	}
}

// signIn has no field for a second factor (Inboxt's SignInInput), so a
// member with two-factor sign-in is refused there, with no session, and
// signs in on the site's page instead.
func TestSignInRefusesTwoFactorMembers(t *testing.T) {
	e := newEnv(t, options{})
	withTwoFactor(t, e)
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

// updateAccount and deleteAccount have no field for the current password
// or a code (Inboxt's UpdateAccountInput and DeleteAccountInput), which the
// account page asks of a member with two-factor sign-in: for such a member
// they are refused and change nothing; the account page does it.
func TestAccountOperationsRefuseTwoFactorMembers(t *testing.T) {
	e := newEnv(t, options{})
	withTwoFactor(t, e)
	session := e.signIn(e.member)

	r := e.wantError(session, `mutation { updateAccount(data: {password: "a password of the thief"}) { id } }`, nil, 200, "FORBIDDEN")
	if !strings.Contains(r.Errors[0].Message, "two-factor sign-in") || !strings.Contains(r.Errors[0].Message, "/settings/account") {
		t.Fatalf("%+v", r.Errors)
	}
	if _, err := members.Of(e.store).Authenticate(t.Context(), "alice", "a password of the thief"); err == nil {
		t.Fatal("updateAccount changed the password of a member with two-factor sign-in")
	}
	if _, err := members.Of(e.store).Authenticate(t.Context(), "alice", "correct horse battery"); err != nil {
		t.Fatalf("the password changed: %v", err)
	}

	r = e.wantError(session, `mutation { deleteAccount(data: {emailAddress: "alice"}) { success } }`, nil, 200, "FORBIDDEN")
	if !strings.Contains(r.Errors[0].Message, "/settings/account") {
		t.Fatalf("%+v", r.Errors)
	}
	if _, err := members.Of(e.store).Member(t.Context(), "alice"); err != nil {
		t.Fatalf("deleteAccount deleted a member with two-factor sign-in: %v", err)
	}
	// The session still works for the rest.
	var out struct{ EmptyTrash struct{ Success bool } }
	e.doAs(session, `mutation { emptyTrash { success } }`, nil, &out)
	if !out.EmptyTrash.Success {
		t.Fatal("the session stopped working")
	}
}

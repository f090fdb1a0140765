package account_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// A store that stops taking writes while a visitor signs up (a reload, a
// full disk) leaves the account with its session, or no account: the
// account's record is written and the store refuses everything after
// it, and the visitor is signed in to the account it was told it has.
// Before, the session was a second transaction: the visitor was sent to
// the sign-in page (GraphQL's createAccount answered INTERNAL_SERVER_ERROR)
// and a second try found the username taken.
func TestSignUpMakesTheAccountAndItsSessionTogether(t *testing.T) {
	st, il := storagetest.OpenInterleaved(t)
	f := newFixtureOn(t, st, account.Options{OpenRegistration: true})
	var closed <-chan struct{}
	il.BeforeCommit(memberKey(""), func() { closed = il.CloseDuring(st) })
	r := f.post(f.browser(), "/auth/sign_up", url.Values{"username": {"carol"}, "password": {password}, "password_confirmation": {password}})
	if closed == nil {
		t.Fatal("the sign-up wrote no member record")
	}
	<-closed
	wantStatus(t, r, http.StatusSeeOther)
	c := sessionCookie(r)
	if c == nil || r.Header.Get("Location") != "/settings" {
		t.Fatalf("the sign-up answered %s without a session", r.Header.Get("Location"))
	}
	again, err := storage.Open(il.Dir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	m, err := members.Of(again).SessionMember(t.Context(), c.Value)
	if err != nil || m.Username != "carol" {
		t.Fatalf("the session of the sign-up: %v, %v", m, err)
	}
}

// A password change that also revokes access (the checkbox) is one change:
// a store that stops taking writes as the new password is written (a
// reload, a full disk) leaves the new password with no API token or OAuth
// grant left, never the new password beside the old tokens. Before, the
// revocation came after the password's commit, in transactions of its
// own, and was refused: the member was told to revoke each by hand.
func TestPasswordChangeWithRevocationIsOneChange(t *testing.T) {
	st, il := storagetest.OpenInterleaved(t)
	f := newFixtureOn(t, st, account.Options{})
	m := f.member("alice")
	c := f.signedIn("alice")
	_, tokSecret, err := apitokens.Of(st).Create(t.Context(), m.ID, "script", 0)
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := grants.Of(st).CreateApp(t.Context(), "App", "", []string{"urn:ietf:wg:oauth:2.0:oob"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err = members.Of(st).MemberByID(t.Context(), m.ID); err != nil {
		t.Fatal(err)
	}
	code, err := grants.Of(st).CreateCode(t.Context(), app.ClientID, m, "urn:ietf:wg:oauth:2.0:oob", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, oauthSecret, err := grants.Of(st).ExchangeCode(t.Context(), code, func(*grants.Code) error { return nil })
	if err != nil {
		t.Fatal(err)
	}

	var closed <-chan struct{}
	il.BeforeCommit(memberKey(m.ID), func() { closed = il.CloseDuring(st) })
	change := url.Values{"current_password": {password}, "password": {"a new password"}, "password_confirmation": {"a new password"}, "revoke_access": {"1"}}
	r := f.post(c, "/settings/account/password", change)
	if closed == nil {
		t.Fatal("the change wrote no member record")
	}
	<-closed
	again, err := storage.Open(il.Dir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	_, newPassword := members.Of(again).Authenticate(t.Context(), "alice", "a new password")
	_, _, apiToken := apitokens.Of(again).Member(t.Context(), tokSecret)
	_, _, oauthToken := grants.Of(again).Token(t.Context(), oauthSecret)
	if newPassword != nil || apiToken == nil || oauthToken == nil {
		t.Fatalf("HTTP %d; the new password: %v; the API token refused: %v; the OAuth token refused: %v", r.StatusCode, newPassword, apiToken, oauthToken)
	}
	wantStatus(t, r, http.StatusSeeOther)
}

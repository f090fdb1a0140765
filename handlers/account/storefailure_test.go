package account_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
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

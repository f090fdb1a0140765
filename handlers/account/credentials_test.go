package account_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// Keys of storage/members the interleaved tests wait for: a web session
// written, and a member record written (every change of credentials
// writes it).
var (
	sessionKeys = storage.Key("session", "")
	memberKey   = func(id string) []byte { return storage.Key("member", "id", id) }
)

// A change of credentials made by the member (or the operator) while
// someone signs in with the old password in another browser.
type pageChange struct {
	name string
	// prepare runs before the race, in the owner's signed-in browser.
	prepare func(f *fixture, owner *http.Client, m *members.Member) (change func())
}

var pageChanges = []pageChange{
	{"password changed on the account page", func(f *fixture, owner *http.Client, m *members.Member) func() {
		return func() {
			checkStatus(f.t, f.post(owner, "/settings/account/password", url.Values{"current_password": {password},
				"password": {"a brand new password"}, "password_confirmation": {"a brand new password"}}), http.StatusSeeOther)
		}
	}},
	{"two-factor sign-in turned on", func(f *fixture, owner *http.Client, m *members.Member) func() {
		wantStatus(f.t, f.post(owner, "/settings/account/two_factor/start", url.Values{"current_password": {password}}), http.StatusSeeOther)
		secret := secretRE.FindStringSubmatch(f.get(owner, "/settings/account").body)[1]
		return func() {
			checkStatus(f.t, f.post(owner, "/settings/account/two_factor/confirm", url.Values{"code": {totpAt(f.t, secret, time.Now())}}), http.StatusOK)
		}
	}},
	{"reset link ending access used", func(f *fixture, owner *http.Client, m *members.Member) func() {
		token, _, _, err := members.Of(f.store).CreateResetLink(f.t.Context(), m.Username, time.Hour, members.ResetLinkOptions{RevokeAccess: true})
		if err != nil {
			f.t.Fatal(err)
		}
		return func() {
			checkStatus(f.t, f.post(f.browser(), account.ResetPathPrefix+token, url.Values{
				"password": {"a brand new password"}, "password_confirmation": {"a brand new password"}}), http.StatusOK)
		}
	}},
	{"member suspended by the operator", func(f *fixture, owner *http.Client, m *members.Member) func() {
		return func() {
			if _, err := members.Of(f.store).SetSuspended(context.Background(), m.Username, true); err != nil {
				f.t.Error(err)
			}
		}
	}},
}

// checkStatus is wantStatus for the changes, which may run on a goroutine
// of the server (inside another request's transaction): it does not stop
// the test there.
func checkStatus(t *testing.T, r resp, status int) {
	t.Helper()
	if r.StatusCode != status {
		t.Errorf("%s %s: status %d, want %d; body:\n%s", r.Request.Method, r.Request.URL.Path, r.StatusCode, status, r.body)
	}
}

// sessionWorks reports whether the session cookie of r (if any) opens a
// member page.
func (f *fixture) sessionWorks(r resp) bool {
	c := sessionCookie(r)
	if c == nil || c.Value == "" {
		return false
	}
	b := f.browser()
	u, _ := url.Parse(f.srv.URL)
	b.Jar.SetCookies(u, []*http.Cookie{{Name: account.CookieName, Value: c.Value}})
	return f.get(b, "/settings").StatusCode == http.StatusOK
}

// TestSignInRacingACredentialChange: someone signs in with the old password
// while the member changes it (or turns two-factor sign-in on, or a reset
// link ending access is used, or the operator suspends the member). The
// sign-in's session write and the change are played in both orders through
// the store's engine (storagetest.Interleaver); in neither does the sign-in
// leave a session that works.
func TestSignInRacingACredentialChange(t *testing.T) {
	for _, c := range pageChanges {
		t.Run(c.name, func(t *testing.T) {
			st, il := storagetest.OpenInterleaved(t)
			f := newFixtureOn(t, st, account.Options{})
			t.Run("the change commits inside the sign-in's session write", func(t *testing.T) {
				f.t = t
				m := f.member("alice")
				change := c.prepare(f, f.signedIn("alice"), m)
				il.BeforeCommit(sessionKeys, change)
				r := f.signIn(f.browser(), "alice", password, "")
				if f.sessionWorks(r) {
					t.Fatalf("a sign-in with the old password keeps a working session (HTTP %d)", r.StatusCode)
				}
			})
			t.Run("the sign-in commits inside the change", func(t *testing.T) {
				f.t = t
				m := f.member("bob")
				change := c.prepare(f, f.signedIn("bob"), m)
				var r resp
				il.BeforeCommit(memberKey(m.ID), func() { r = f.signIn(f.browser(), "bob", password, "") })
				change()
				if r.Response == nil {
					t.Fatal("the change wrote no member record")
				}
				if f.sessionWorks(r) {
					t.Fatalf("a sign-in with the old password keeps a working session (HTTP %d)", r.StatusCode)
				}
			})
		})
	}
}

// TestSignInsLoopingWhileThePasswordChanges: two browsers sign in with the
// old password in a loop while the member changes it (meant for -race). Once
// the change has returned, no session they got works.
func TestSignInsLoopingWhileThePasswordChanges(t *testing.T) {
	f := newFixture(t, account.Options{FailuresPerUsername: 1000, FailuresPerIP: 1000})
	f.member("alice")
	owner := f.signedIn("alice")
	var (
		mu      sync.Mutex
		cookies []resp
	)
	stop := storagetest.Loop(2, func() bool {
		form := url.Values{"username": {"alice"}, "password": {password}}.Encode()
		res, err := f.browser().Post(f.srv.URL+"/auth/sign_in", "application/x-www-form-urlencoded", strings.NewReader(form))
		if err != nil {
			t.Error(err)
			return false
		}
		res.Body.Close()
		if res.StatusCode == http.StatusUnauthorized {
			return false // the old password no longer works
		}
		mu.Lock()
		cookies = append(cookies, resp{Response: res})
		mu.Unlock()
		return true
	})
	storagetest.Eventually(t, "a sign-in with the old password", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(cookies) > 0
	})
	wantStatus(t, f.post(owner, "/settings/account/password", url.Values{"current_password": {password},
		"password": {"a brand new password"}, "password_confirmation": {"a brand new password"}}), http.StatusSeeOther)
	stop()
	for _, r := range cookies {
		if f.sessionWorks(r) {
			t.Fatalf("a session from the old password works after the change (%d sign-ins)", len(cookies))
		}
	}
}

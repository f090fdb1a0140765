package graphql_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestAccountChangesNeedARecentSignIn: updateAccount's password change and
// deleteAccount over a session whose password was not given within
// members.RecentSignIn (GitHub's "sudo mode") answer RECENT_SIGN_IN_REQUIRED,
// naming the page where the member confirms it, and change nothing; once
// the password is confirmed there, they work. API and OAuth tokens never
// run them (FORBIDDEN).
func TestAccountChangesNeedARecentSignIn(t *testing.T) {
	e := newEnv(t, options{})
	// A session with no password given lately (made by the operator's
	// tools here; a sign-in's grows old the same way).
	id, err := members.Of(e.store).CreateSession(t.Context(), e.member.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stale := sessionPrefix + id
	update := `mutation { updateAccount(data: {password: "a password of the thief"}) { id } }`
	del := `mutation { deleteAccount(data: {emailAddress: "alice"}) { success } }`
	for _, q := range []string{update, del} {
		r := e.wantError(stale, q, nil, 200, "RECENT_SIGN_IN_REQUIRED")
		if !strings.Contains(r.Errors[0].Message, account.ConfirmPath) {
			t.Fatalf("the error does not name the confirmation page: %q", r.Errors[0].Message)
		}
		e.wantError(e.token, q, nil, 200, "FORBIDDEN")
	}
	if _, err := members.Of(e.store).Authenticate(t.Context(), "alice", "correct horse battery"); err != nil {
		t.Fatalf("the password changed: %v", err)
	}
	// Renaming nothing needs no password.
	e.doAs(stale, `mutation { updateAccount(data: {username: "alice"}) { id } }`, nil, nil)

	// The member confirms the password on the page, from this browser.
	pagesSrv := httptest.NewServer(account.New(e.store, account.Options{}))
	t.Cleanup(pagesSrv.Close)
	pages := pagesSrv.URL
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(pages)
	jar.SetCookies(u, []*http.Cookie{{Name: account.CookieName, Value: id}})
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(pw string) int {
		req, _ := http.NewRequest(http.MethodPost, pages+account.ConfirmPath, strings.NewReader(url.Values{"current_password": {pw}, "return_to": {"/library"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if status := post("wrong password"); status != http.StatusUnauthorized {
		t.Fatalf("a wrong password on the confirmation page: %d", status)
	}
	e.wantError(stale, update, nil, 200, "RECENT_SIGN_IN_REQUIRED")
	if status := post("correct horse battery"); status != http.StatusSeeOther {
		t.Fatalf("the right password on the confirmation page: %d", status)
	}
	e.doAs(stale, `mutation { updateAccount(data: {password: "another long password"}) { id } }`, nil, nil)
	if _, err := members.Of(e.store).Authenticate(t.Context(), "alice", "another long password"); err != nil {
		t.Fatalf("the new password does not work: %v", err)
	}
}

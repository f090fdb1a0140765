package account_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// session is the cookie secret of a new hour-long session of m, made in
// the store as a sign-in would.
func (f *fixture) session(m *members.Member) string {
	f.t.Helper()
	id, err := members.Of(f.store).CreateSession(f.t.Context(), m.ID, time.Hour)
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// signedIn signs username in on a fresh browser.
func (f *fixture) signedIn(username string) *http.Client {
	f.t.Helper()
	c := f.browser()
	wantStatus(f.t, f.signIn(c, username, password, ""), http.StatusSeeOther)
	return c
}

func TestAccountPageNeedsSignIn(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	c := f.browser()
	r := f.get(c, "/settings/account")
	wantRedirect(t, r, "/auth/sign_in?return_to=%2Fsettings%2Faccount")
	r = f.post(c, "/settings/account/delete", url.Values{"confirm_username": {"alice"}, "current_password": {password}})
	wantStatus(t, r, http.StatusSeeOther)
	if _, err := members.Of(f.store).Member(t.Context(), "alice"); err != nil {
		t.Fatalf("a signed-out post deleted the account: %v", err)
	}
	c = f.signedIn("alice")
	r = f.get(c, "/settings/account")
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "@alice")
	wantBody(t, r, "(this device)")
	// The menu and the settings page link to it.
	wantBody(t, r, `<a href="/settings/account" aria-current="page">Account</a>`)
	wantBody(t, f.get(c, "/settings"), `<a href="/settings/account">Account</a>`)
	wantStatus(t, f.get(c, "/settings/account/password"), http.StatusMethodNotAllowed)
	wantStatus(t, f.post(c, "/settings/account/nothing", url.Values{}), http.StatusNotFound)
}

func TestAccountFormsRefuseCrossOriginAndBigBodies(t *testing.T) {
	f := newFixture(t, account.Options{MaxFormBytes: 1024})
	f.member("alice")
	c := f.signedIn("alice")
	r := f.post(c, "/settings/account/display_name", url.Values{"display_name": {"Evil"}}, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	wantStatus(t, r, http.StatusForbidden)
	r = f.post(c, "/settings/account/display_name", url.Values{"display_name": {strings.Repeat("a", 2000)}})
	wantStatus(t, r, http.StatusRequestEntityTooLarge)
	if m, _ := members.Of(f.store).Member(t.Context(), "alice"); m.DisplayName != "Display alice" {
		t.Fatalf("display name changed to %q", m.DisplayName)
	}
}

func TestAccountDisplayName(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	c := f.signedIn("alice")
	r := f.post(c, "/settings/account/display_name", url.Values{"display_name": {strings.Repeat("x", 31)}})
	wantStatus(t, r, http.StatusBadRequest)
	wantBody(t, r, "Display name must be at most 30 characters")
	r = f.post(c, "/settings/account/display_name", url.Values{"display_name": {"  Alice Liddell "}})
	wantStatus(t, r, http.StatusSeeOther)
	r = f.get(c, r.Header.Get("Location"))
	wantBody(t, r, "Your display name was saved.")
	wantBody(t, r, `value="Alice Liddell"`)
	if m, _ := members.Of(f.store).Member(t.Context(), "alice"); m.DisplayName != "Alice Liddell" {
		t.Fatalf("display name %q", m.DisplayName)
	}
}

func TestAccountChangePassword(t *testing.T) {
	f := newFixture(t, account.Options{})
	m := f.member("alice")
	other := f.signedIn("alice")
	c := f.signedIn("alice")
	tok, tokSecret, err := apitokens.Of(f.store).Create(t.Context(), m.ID, "cli", 0)
	if err != nil {
		t.Fatal(err)
	}
	form := func(cur, next, confirm string) url.Values {
		return url.Values{"current_password": {cur}, "password": {next}, "password_confirmation": {confirm}}
	}
	for _, tc := range []struct {
		form   url.Values
		status int
		msg    string
	}{
		{form(password, "short", "short"), http.StatusBadRequest, "The new password must be 8 to 128 characters long."},
		{form(password, "new password 1", "new password 2"), http.StatusBadRequest, "The two new passwords don&#39;t match."},
		{form("wrong password", "new password 1", "new password 1"), http.StatusUnauthorized, "Your current password is not right."},
	} {
		r := f.post(c, "/settings/account/password", tc.form)
		wantStatus(t, r, tc.status)
		wantBody(t, r, tc.msg)
		if strings.Contains(r.body, "invalid_grant") {
			t.Fatal("protocol wording on a page")
		}
	}
	if _, err := members.Of(f.store).Authenticate(t.Context(), "alice", password); err != nil {
		t.Fatalf("refused changes changed the password: %v", err)
	}
	r := f.post(c, "/settings/account/password", form(password, "a new password", "a new password"))
	wantStatus(t, r, http.StatusSeeOther)
	wantBody(t, f.get(c, r.Header.Get("Location")), "Your password was changed.")
	if _, err := members.Of(f.store).Authenticate(t.Context(), "alice", "a new password"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	// This browser stays signed in, the other one is signed out; the API
	// token (not asked to be revoked) still works.
	wantStatus(t, f.get(c, "/settings/account"), http.StatusOK)
	wantStatus(t, f.get(other, "/settings/account"), http.StatusSeeOther)
	if _, _, err := apitokens.Of(f.store).Member(t.Context(), tokSecret); err != nil {
		t.Fatalf("token %s ended without the checkbox: %v", tok.ID, err)
	}
	// With the checkbox, tokens and grants end too.
	app, _, err := grants.Of(f.store).CreateApp(t.Context(), "App", "", []string{"urn:ietf:wg:oauth:2.0:oob"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	m, err = members.Of(f.store).MemberByID(t.Context(), m.ID) // as its session reads it now
	if err != nil {
		t.Fatal(err)
	}
	code, err := grants.Of(f.store).CreateCode(t.Context(), app.ClientID, m, "urn:ietf:wg:oauth:2.0:oob", []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, oauthSecret, err := grants.Of(f.store).ExchangeCode(t.Context(), code, func(*grants.Code) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := grants.Of(f.store).Token(t.Context(), oauthSecret); err != nil {
		t.Fatal(err)
	}
	f2 := form("a new password", "a third password", "a third password")
	f2.Set("revoke_access", "1")
	r = f.post(c, "/settings/account/password", f2)
	wantStatus(t, r, http.StatusSeeOther)
	wantBody(t, f.get(c, r.Header.Get("Location")), "your API tokens and authorized apps were revoked")
	if _, _, err := apitokens.Of(f.store).Member(t.Context(), tokSecret); err == nil {
		t.Fatal("API token works after revoke_access")
	}
	if _, _, err := grants.Of(f.store).Token(t.Context(), oauthSecret); err == nil {
		t.Fatal("OAuth token works after revoke_access")
	}
}

func TestAccountCurrentPasswordIsRateLimited(t *testing.T) {
	f := newFixture(t, account.Options{FailuresPerUsername: 3})
	f.member("alice")
	c := f.signedIn("alice")
	form := url.Values{"current_password": {"wrong password"}, "password": {"a new password"}, "password_confirmation": {"a new password"}}
	for range 3 {
		wantStatus(t, f.post(c, "/settings/account/password", form), http.StatusUnauthorized)
	}
	form.Set("current_password", password)
	r := f.post(c, "/settings/account/password", form)
	wantStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	wantBody(t, r, "Too many wrong passwords or codes.")
	// The same limit holds on the sign-in page.
	wantStatus(t, f.signIn(f.browser(), "alice", password, ""), http.StatusTooManyRequests)
	if _, err := members.Of(f.store).Authenticate(t.Context(), "alice", password); err != nil {
		t.Fatal("password changed while limited")
	}
}

func TestAccountSessions(t *testing.T) {
	f := newFixture(t, account.Options{})
	m := f.member("alice")
	phone := f.signedIn("alice")
	laptop := f.signedIn("alice")
	c := f.signedIn("alice")
	bob := f.member("bob")
	bobs := f.signedIn("bob")
	list, _ := members.Of(f.store).Sessions(t.Context(), m.ID)
	if len(list) != 3 {
		t.Fatalf("%d sessions", len(list))
	}
	r := f.get(c, "/settings/account")
	if n := strings.Count(r.body, `action="/settings/account/sessions/end"`); n != 2 {
		t.Fatalf("%d End buttons, want 2 (not on this device)", n)
	}
	// A session's id on the page is not a cookie secret.
	for _, ck := range phone.Jar.Cookies(mustURL(f.srv.URL)) {
		if strings.Contains(r.body, ck.Value) {
			t.Fatal("a session's cookie is on the page")
		}
	}
	phoneID := members.SessionPublicID(cookieOf(t, phone, f.srv.URL))
	wantBody(t, r, `value="`+phoneID+`"`)
	// Bob can't end Alice's session by its id.
	wantStatus(t, f.post(bobs, "/settings/account/sessions/end", url.Values{"id": {phoneID}}), http.StatusNotFound)
	wantStatus(t, f.get(phone, "/settings/account"), http.StatusOK)
	r = f.post(c, "/settings/account/sessions/end", url.Values{"id": {phoneID}})
	wantStatus(t, r, http.StatusSeeOther)
	wantBody(t, f.get(c, r.Header.Get("Location")), "The session was ended.")
	wantStatus(t, f.get(phone, "/settings/account"), http.StatusSeeOther)
	wantStatus(t, f.get(laptop, "/settings/account"), http.StatusOK)
	r = f.post(c, "/settings/account/sessions/end", url.Values{"id": {phoneID}})
	wantStatus(t, r, http.StatusNotFound)
	wantBody(t, r, "That session has already ended.")

	r = f.post(c, "/settings/account/sessions/end_others", nil)
	wantStatus(t, r, http.StatusSeeOther)
	wantBody(t, f.get(c, r.Header.Get("Location")), "You were signed out everywhere else.")
	wantStatus(t, f.get(laptop, "/settings/account"), http.StatusSeeOther)
	wantStatus(t, f.get(c, "/settings/account"), http.StatusOK)
	wantStatus(t, f.get(bobs, "/settings/account"), http.StatusOK)
	if list, _ := members.Of(f.store).Sessions(t.Context(), bob.ID); len(list) != 1 {
		t.Fatalf("bob's sessions: %d", len(list))
	}
}

func mustURL(s string) *url.URL { u, _ := url.Parse(s); return u }

func cookieOf(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	for _, ck := range c.Jar.Cookies(mustURL(base)) {
		if ck.Name == account.CookieName {
			return ck.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

func TestAccountDelete(t *testing.T) {
	f := newFixture(t, account.Options{})
	m := f.member("alice")
	f.member("bob")
	other := f.signedIn("alice")
	c := f.signedIn("alice")
	item, _, err := library.Of(f.store).SaveItem(t.Context(), m.ID, library.NewItem{URL: "https://example.org/a", Title: "A"})
	if err != nil {
		t.Fatal(err)
	}
	_, tokSecret, _ := apitokens.Of(f.store).Create(t.Context(), m.ID, "cli", 0)
	app, _, _ := grants.Of(f.store).CreateApp(t.Context(), "App", "", []string{"urn:ietf:wg:oauth:2.0:oob"}, []string{"read"})
	code, _ := grants.Of(f.store).CreateCode(t.Context(), app.ClientID, m, "urn:ietf:wg:oauth:2.0:oob", []string{"read"}, "")
	_, oauthSecret, err := grants.Of(f.store).ExchangeCode(t.Context(), code, func(*grants.Code) error { return nil })
	if err != nil {
		t.Fatal(err)
	}

	r := f.post(c, "/settings/account/delete", url.Values{"confirm_username": {"bob"}, "current_password": {password}})
	wantStatus(t, r, http.StatusBadRequest)
	wantBody(t, r, "Type your username, alice, exactly to confirm.")
	r = f.post(c, "/settings/account/delete", url.Values{"confirm_username": {"alice"}, "current_password": {"wrong password"}})
	wantStatus(t, r, http.StatusUnauthorized)
	if _, err := members.Of(f.store).Member(t.Context(), "alice"); err != nil {
		t.Fatalf("refused deletes deleted: %v", err)
	}

	r = f.post(c, "/settings/account/delete", url.Values{"confirm_username": {"alice"}, "current_password": {password}})
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "Your account and everything in it were deleted.")
	if strings.Contains(r.body, "@alice") {
		t.Fatal("the page after deletion still shows the member")
	}
	if ck := sessionCookie(r); ck == nil || ck.MaxAge >= 0 {
		t.Fatalf("cookie not cleared: %v", ck)
	}
	if _, err := members.Of(f.store).Member(t.Context(), "alice"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("member after delete: %v", err)
	}
	if _, err := library.Of(f.store).SavedItem(t.Context(), m.ID, item.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("saved item after delete: %v", err)
	}
	if _, _, err := apitokens.Of(f.store).Member(t.Context(), tokSecret); err == nil {
		t.Fatal("API token works after delete")
	}
	if _, _, err := grants.Of(f.store).Token(t.Context(), oauthSecret); err == nil {
		t.Fatal("OAuth token works after delete")
	}
	if apps, _ := grants.Of(f.store).AuthorizedApps(t.Context(), m.ID); len(apps) != 0 {
		t.Fatalf("grants left: %d", len(apps))
	}
	if list, _ := members.Of(f.store).Sessions(t.Context(), m.ID); len(list) != 0 {
		t.Fatalf("%d sessions left", len(list))
	}
	wantStatus(t, f.get(other, "/settings/account"), http.StatusSeeOther)
	wantStatus(t, f.signIn(f.browser(), "alice", password, ""), http.StatusUnauthorized)
	if _, err := members.Of(f.store).Member(t.Context(), "bob"); err != nil {
		t.Fatalf("bob deleted too: %v", err)
	}
}

func TestAccountFormsAreRateLimited(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	f.member("bob")
	c := f.signedIn("alice")
	for i := range account.AccountChangesPerMember {
		wantStatus(t, f.post(c, "/settings/account/display_name", url.Values{"display_name": {fmt.Sprint("Alice ", i)}}), http.StatusSeeOther)
	}
	r := f.post(c, "/settings/account/display_name", url.Values{"display_name": {"One too many"}})
	wantStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	wantBody(t, r, "You made many changes in a short time.")
	if m, _ := members.Of(f.store).Member(t.Context(), "alice"); m.DisplayName == "One too many" {
		t.Fatal("a limited form changed the name")
	}
	// Another member is not limited by alice's changes.
	wantStatus(t, f.post(f.signedIn("bob"), "/settings/account/display_name", url.Values{"display_name": {"Bob"}}), http.StatusSeeOther)
}

// TestConfirmPage: the confirmation page asks a signed-in member for the
// password again; the right one records it in the session
// (members.Session.AuthAt, what GraphQL's account changes need) and goes
// back to a local return_to only; a wrong one counts as a failed sign-in.
func TestConfirmPage(t *testing.T) {
	f := newFixture(t, account.Options{FailuresPerUsername: 2})
	m := f.member("alice")
	wantStatus(t, f.get(f.browser(), account.ConfirmPath), http.StatusSeeOther) // signed out: sign in first
	id := f.session(m)
	c := f.browser()
	c.Jar.SetCookies(mustURL(f.srv.URL), []*http.Cookie{{Name: account.CookieName, Value: id}})
	recent := func() bool {
		_, sess, err := members.Of(f.store).SessionAndMember(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return sess.RecentlyAuthenticated(time.Now())
	}
	if recent() {
		t.Fatal("a session made without a password counts as a recent sign-in")
	}
	r := f.get(c, account.ConfirmPath+"?return_to=/library")
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, `name="current_password"`)
	wantBody(t, r, `value="/library"`)
	wantStatus(t, f.post(c, account.ConfirmPath, url.Values{"current_password": {"wrong password"}}), http.StatusUnauthorized)
	if recent() {
		t.Fatal("a wrong password confirmed the session")
	}
	r = f.post(c, account.ConfirmPath, url.Values{"current_password": {password}, "return_to": {"https://evil.example/"}})
	wantRedirect(t, r, account.AccountPath+"?done=confirmed")
	if !recent() {
		t.Fatal("the right password did not confirm the session")
	}
	r = f.post(c, account.ConfirmPath, url.Values{"current_password": {password}, "return_to": {"/library"}})
	if loc := r.Header.Get("Location"); loc != "/library" {
		t.Fatalf("after confirming: to %q, want /library", loc)
	}
}

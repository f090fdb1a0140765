package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

// TestAuthorizedAppsPageListsApps: the settings page lists each app the
// member approved, its scopes in plain words, and when.
func TestAuthorizedAppsPageListsApps(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	tooter := f.register("Tooter", "https://app.example/cb", "read write")
	bot := f.register("Bot", "https://bot.example/cb", "read")
	f.appToken(bot, "") // an app token is nobody's authorization
	b := f.signedIn("alice")
	dayBefore := time.Now().UTC().Format("2006-01-02") // a run across midnight approves on either day
	f.exchange(tooter, b.approve(authQuery(tooter, "https://app.example/cb", "read:statuses write:media", "s")), "https://app.example/cb", "")
	dayAfter := time.Now().UTC().Format("2006-01-02")

	r := b.get(oauth.AuthorizedAppsPath)
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "Tooter")
	wantBody(t, r, "Read your timelines and posts")
	wantBody(t, r, "Upload files")
	if !strings.Contains(r.body, dayBefore) && !strings.Contains(r.body, dayAfter) {
		t.Fatalf("the page does not say the day of the approval (%s):\n%s", dayAfter, r.body)
	}
	if strings.Contains(r.body, "Bot") || strings.Contains(r.body, "Publish posts") {
		t.Fatalf("the page lists what alice did not approve:\n%s", r.body)
	}
	if fm := form(t, r, oauth.AuthorizedAppsPath); fm.hidden.Get("client_id") != tooter.ClientID {
		t.Fatalf("revoke form for %q", fm.hidden.Get("client_id"))
	}
	// The page is in the settings menu.
	wantBody(t, b.get(account.SettingsPath), oauth.AuthorizedAppsTitle)

	// Without a session the page asks to sign in.
	r = f.browser().get(oauth.AuthorizedAppsPath)
	wantStatus(t, r, http.StatusSeeOther)
}

// TestAuthorizedAppsRevoke: revoking an app on the page removes every
// token of that app for that member (and voids codes not yet exchanged),
// and nothing else.
func TestAuthorizedAppsRevoke(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	f.member("bob")
	tooter := f.register("Tooter", "https://app.example/cb", "read")
	other := f.register("Other", "https://other.example/cb", "read")
	cb := "https://app.example/cb"

	alice := f.signedIn("alice")
	t1 := f.exchange(tooter, alice.approve(authQuery(tooter, cb, "read", "s")), cb, "")
	t2 := f.exchange(tooter, alice.approve(authQuery(tooter, cb, "read:statuses", "s")), cb, "")
	aliceOther := f.exchange(other, alice.approve(authQuery(other, "https://other.example/cb", "read", "s")), "https://other.example/cb", "")
	bobs := f.memberToken(tooter, "bob", "read")
	appTok := f.appToken(tooter, "")
	// A code approved but not yet exchanged when alice revokes.
	pending := alice.approve(authQuery(tooter, cb, "read", "s"))

	page := alice.get(oauth.AuthorizedAppsPath)
	var revokeForm *htmlForm
	for _, fm := range forms(t, page.body) {
		if fm.action == oauth.AuthorizedAppsPath && fm.hidden.Get("client_id") == tooter.ClientID {
			revokeForm = fm
		}
	}
	if revokeForm == nil {
		t.Fatalf("no revoke form for Tooter:\n%s", page.body)
	}
	r := alice.post(oauth.AuthorizedAppsPath, revokeForm.hidden)
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "Tooter was revoked")

	for _, tok := range []string{t1, t2} {
		wantStatus(t, f.getWithToken(oauth.AppsVerifyPath, tok), http.StatusUnauthorized)
	}
	for name, tok := range map[string]string{"alice's other app": aliceOther, "bob's": bobs, "the app token": appTok} {
		if r := f.getWithToken(oauth.AppsVerifyPath, tok); r.StatusCode != http.StatusOK {
			t.Errorf("%s token: HTTP %d after alice revoked Tooter", name, r.StatusCode)
		}
	}
	wantOAuthError(t, f.token(codeForm(tooter, pending, cb, "")), "invalid_grant")
	page = alice.get(oauth.AuthorizedAppsPath)
	if strings.Contains(page.body, "Tooter") || !strings.Contains(page.body, "Other") {
		t.Fatalf("after revoking:\n%s", page.body)
	}
}

// TestAuthorizedAppsRevokeRefusals: a revoke form from another site, or
// for an unknown app, changes nothing.
func TestAuthorizedAppsRevokeRefusals(t *testing.T) {
	f := newFixture(t)
	tooter := f.register("Tooter", "https://app.example/cb", "read")
	tok := f.memberToken(tooter, "alice", "read")
	b := f.signedIn("alice")

	req, _ := http.NewRequest(http.MethodPost, f.url(oauth.AuthorizedAppsPath), strings.NewReader(url.Values{"client_id": {tooter.ClientID}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	wantStatus(t, do(t, b.c, req), http.StatusForbidden)

	for _, id := range []string{"", "nope", "a/b"} {
		r := b.post(oauth.AuthorizedAppsPath, url.Values{"client_id": {id}})
		wantStatus(t, r, http.StatusBadRequest)
	}
	// A form over the pages' size limit is 413, as on the other pages.
	r := b.post(oauth.AuthorizedAppsPath, url.Values{"client_id": {tooter.ClientID}, "pad": {strings.Repeat("x", 1<<20)}})
	wantStatus(t, r, http.StatusRequestEntityTooLarge)
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
}

// TestAuthorizedAppsApproveAgain: after revoking, the member can approve
// the app again and it is listed again.
func TestAuthorizedAppsApproveAgain(t *testing.T) {
	f, tooter, b := aliceAuthorizing(t, "Tooter", "read")
	f.exchange(tooter, b.approve(authQuery(tooter, "https://app.example/cb", "read", "s")), "https://app.example/cb", "")
	wantStatus(t, b.submit(b.get(oauth.AuthorizedAppsPath), oauth.AuthorizedAppsPath, nil), http.StatusOK)
	tok := f.exchange(tooter, b.approve(authQuery(tooter, "https://app.example/cb", "read", "s")), "https://app.example/cb", "")
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
	wantBody(t, b.get(oauth.AuthorizedAppsPath), "Tooter")
}

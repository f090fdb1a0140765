package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage"
)

// An authorize flow of a member with two-factor sign-in reaches the consent
// page only after the code: the password alone leaves the browser without a
// session, and the authorize page keeps sending it to sign in.
func TestAuthorizeWithTwoFactorNeedsTheCode(t *testing.T) {
	f := newFixture(t)
	m := f.member("alice")
	const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	if err := f.store.StartTwoFactorSetup(m.ID, secret); err != nil {
		t.Fatal(err)
	}
	first, _ := storage.TOTPCode(secret, time.Now().Add(-30*time.Second))
	if _, err := f.store.ConfirmTwoFactor(m.ID, first); err != nil {
		t.Fatal(err)
	}
	app := f.register("Tooter", "https://app.example/cb", "read")
	q := authQuery(app, "https://app.example/cb", "read", "xyz")
	b := f.browser()
	signIn := b.follow(b.get(oauth.AuthorizePath + "?" + q.Encode()))
	wantStatus(t, signIn, http.StatusOK)
	r := b.submit(signIn, account.SignInPath, url.Values{"username": {"alice"}, "password": {password}})
	wantStatus(t, r, http.StatusSeeOther)
	loc, _ := r.Location()
	if loc.Path != account.TwoFactorPath {
		t.Fatalf("after the password: sent to %s, want the code page", loc)
	}
	// Straight back to authorize: still signed out.
	again := b.get(oauth.AuthorizePath + "?" + q.Encode())
	wantStatus(t, again, http.StatusSeeOther)
	if l, _ := again.Location(); l.Path != account.SignInPath {
		t.Fatalf("authorize without the code sent to %s", l)
	}
	codePage := b.follow(r)
	wantStatus(t, codePage, http.StatusOK)
	if strings.Contains(codePage.body, "Tooter") {
		t.Fatal("the code page shows the consent")
	}
	back := b.submit(codePage, account.TwoFactorPath, url.Values{"code": {"000000"}})
	wantStatus(t, back, http.StatusUnauthorized)
	code, _ := storage.TOTPCode(secret, time.Now())
	back = b.submit(codePage, account.TwoFactorPath, url.Values{"code": {code}})
	wantStatus(t, back, http.StatusSeeOther)
	consent := b.follow(back)
	wantStatus(t, consent, http.StatusOK)
	wantBody(t, consent, "Tooter")
}

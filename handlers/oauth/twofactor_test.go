package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// An authorize flow of a member with two-factor sign-in reaches the consent
// page only after the code: the password alone leaves the browser without a
// session, and the authorize page keeps sending it to sign in.
func TestAuthorizeWithTwoFactorNeedsTheCode(t *testing.T) {
	f := newFixture(t)
	m := f.member("alice")
	const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	if err := members.Of(f.store).StartTwoFactorSetup(t.Context(), m.ID, secret); err != nil {
		t.Fatal(err)
	}
	// The code of now confirms (accepted within the skew even if a step
	// boundary passes before the check); the sign-in below uses the next
	// step's, which the confirmation did not use up. A code of the previous
	// step here would be refused when a boundary passed in between.
	first, _ := members.TOTPCode(secret, time.Now())
	if _, err := members.Of(f.store).ConfirmTwoFactor(t.Context(), m.ID, first, ""); err != nil {
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
	code, _ := members.TOTPCode(secret, time.Now().Add(30*time.Second))
	back = b.submit(codePage, account.TwoFactorPath, url.Values{"code": {code}})
	wantStatus(t, back, http.StatusSeeOther)
	consent := b.follow(back)
	wantStatus(t, consent, http.StatusOK)
	wantBody(t, consent, "Tooter")
}

// The two-factor and reset-link flows log no secret: the fixture's cleanup
// looks for session ids, challenges and reset tokens in the debug log, and
// this test for the TOTP key and the recovery codes.
func TestTwoFactorAndResetLinkLogNoSecrets(t *testing.T) {
	f := newFixture(t)
	m := f.member("alice")
	const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	_ = members.Of(f.store).StartTwoFactorSetup(t.Context(), m.ID, secret)
	first, _ := members.TOTPCode(secret, time.Now())
	codes, err := members.Of(f.store).ConfirmTwoFactor(t.Context(), m.ID, first, "")
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	p := b.get(account.SignInPath)
	r := b.submit(p, account.SignInPath, url.Values{"username": {"alice"}, "password": {password}})
	codePage := b.follow(r)
	wantStatus(t, b.submit(codePage, account.TwoFactorPath, url.Values{"code": {"zzzzz-zzzzz"}}), http.StatusUnauthorized)
	wantStatus(t, b.submit(codePage, account.TwoFactorPath, url.Values{"code": {codes[0]}}), http.StatusSeeOther)

	token, _, _, err := members.Of(f.store).CreateResetLink(t.Context(), "alice", time.Hour, members.ResetLinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb := f.browser()
	page := rb.get(account.ResetPathPrefix + token)
	wantStatus(t, page, http.StatusOK)
	wantStatus(t, rb.submit(page, account.ResetPathPrefix+token, url.Values{
		"password": {"Zq9 brand-new secret"}, "password_confirmation": {"Zq9 brand-new secret"}, "code": {codes[1]}}), http.StatusOK)
	logs := f.logs.String()
	if !strings.Contains(logs, "reset link") || !strings.Contains(logs, "signed in") {
		t.Fatalf("the flows were not logged at all:\n%s", logs)
	}
	for _, s := range append([]string{secret, token, "Zq9 brand-new secret"}, codes...) {
		if strings.Contains(logs, s) {
			t.Errorf("%.6s... appears in the logs:\n%s", s, logs)
		}
	}
}

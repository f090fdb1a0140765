package account_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func TestSignInPageHintsAtResetLinks(t *testing.T) {
	f := newFixture(t, account.Options{})
	wantBody(t, f.get(f.browser(), "/auth/sign_in"), "Forgot your password? Ask the site's operator for a reset link.")
}

func TestResetLink(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	old := f.signedIn("alice")
	token, _, _, err := members.Of(f.store).CreateResetLink(t.Context(), "alice", time.Hour, members.ResetLinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := f.browser()
	for _, bad := range []string{"/auth/reset/", "/auth/reset/hrt_nope", "/auth/reset/" + token + "x"} {
		r := f.get(c, bad)
		wantStatus(t, r, http.StatusNotFound)
		wantBody(t, r, "Ask the site&#39;s operator for a new one.")
	}
	page := f.get(c, "/auth/reset/"+token)
	wantStatus(t, page, http.StatusOK)
	wantBody(t, page, "@alice")
	if page.Header.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(page.body, `<meta name="referrer" content="no-referrer">`) {
		t.Fatalf("the reset page may send its address on: %q", page.Header.Get("Referrer-Policy"))
	}
	if strings.Contains(page.body, `name="code"`) {
		t.Fatal("asks for a code without two-factor sign-in")
	}
	r := f.post(c, "/auth/reset/"+token, url.Values{"password": {"short"}, "password_confirmation": {"short"}})
	wantStatus(t, r, http.StatusBadRequest)
	r = f.post(c, "/auth/reset/"+token, url.Values{"password": {"a new password"}, "password_confirmation": {"another one"}})
	wantStatus(t, r, http.StatusBadRequest)
	wantBody(t, r, "The two passwords don&#39;t match.")
	// Cross-origin posts are refused like every form's.
	wantStatus(t, f.post(c, "/auth/reset/"+token, url.Values{"password": {"a new password"}, "password_confirmation": {"a new password"}},
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	if _, err := members.Of(f.store).Authenticate(t.Context(), "alice", password); err != nil {
		t.Fatal("refused posts changed the password")
	}
	r = f.post(c, "/auth/reset/"+token, url.Values{"password": {"a new password"}, "password_confirmation": {"a new password"}})
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "Your new password is set")
	if _, err := members.Of(f.store).Authenticate(t.Context(), "alice", "a new password"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	// Every session ended; the link works once.
	wantStatus(t, f.get(old, "/settings"), http.StatusSeeOther)
	r = f.post(c, "/auth/reset/"+token, url.Values{"password": {"a third password"}, "password_confirmation": {"a third password"}})
	wantStatus(t, r, http.StatusNotFound)
	if _, err := members.Of(f.store).Authenticate(t.Context(), "alice", "a new password"); err != nil {
		t.Fatal("a used link changed the password again")
	}
}

func TestResetLinkWithTwoFactor(t *testing.T) {
	f := newFixture(t, account.Options{})
	_, codes := f.aliceWithTwoFactor()

	token, _, _, _ := members.Of(f.store).CreateResetLink(t.Context(), "alice", time.Hour, members.ResetLinkOptions{})
	c := f.browser()
	wantBody(t, f.get(c, "/auth/reset/"+token), `name="code"`)
	form := url.Values{"password": {"a new password"}, "password_confirmation": {"a new password"}, "code": {"zzzzz-zzzzz"}}
	r := f.post(c, "/auth/reset/"+token, form)
	wantStatus(t, r, http.StatusUnauthorized)
	wantBody(t, r, "That code is not right.")
	form.Set("code", codes[0])
	wantStatus(t, f.post(c, "/auth/reset/"+token, form), http.StatusOK)
	if on, _, _ := members.Of(f.store).TwoFactorStatus(t.Context(), f.mustMember("alice").ID); !on {
		t.Fatal("a plain reset link turned two-factor sign-in off")
	}
	// The operator's --disable-2fa link asks no code and turns it off.
	token, _, _, _ = members.Of(f.store).CreateResetLink(t.Context(), "alice", time.Hour, members.ResetLinkOptions{DisableTwoFactor: true})
	page := f.get(c, "/auth/reset/"+token)
	if strings.Contains(page.body, `name="code"`) {
		t.Fatal("a --disable-2fa link asks for a code")
	}
	if on, _, _ := members.Of(f.store).TwoFactorStatus(t.Context(), f.mustMember("alice").ID); !on {
		t.Fatal("issuing or opening the link turned two-factor sign-in off before it was used")
	}
	wantStatus(t, f.post(c, "/auth/reset/"+token, url.Values{"password": {"a third password"}, "password_confirmation": {"a third password"}}), http.StatusOK)
	m := f.mustMember("alice")
	if on, _, _ := members.Of(f.store).TwoFactorStatus(t.Context(), m.ID); on || m.TwoFactor {
		t.Fatal("two-factor sign-in still on")
	}
	r = f.signIn(f.browser(), "alice", "a third password", "")
	if r.Header.Get("Location") != "/settings" {
		t.Fatalf("sign-in after the reset: %q", r.Header.Get("Location"))
	}
}

func TestResetLinkExpires(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	if _, _, _, err := members.Of(f.store).CreateResetLink(t.Context(), "alice", 8*24*time.Hour, members.ResetLinkOptions{}); !storage.IsInvalid(err) {
		t.Fatalf("8 days: %v", err)
	}
	token, _, _, _ := members.Of(f.store).CreateResetLink(t.Context(), "alice", time.Second, members.ResetLinkOptions{})
	deadline := time.Now().Add(10 * time.Second)
	for f.get(f.browser(), "/auth/reset/"+token).StatusCode != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("a one-second link still works after 10 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	wantStatus(t, f.post(f.browser(), "/auth/reset/"+token, url.Values{"password": {"a new password"}, "password_confirmation": {"a new password"}}), http.StatusNotFound)
}

// A link made with --revoke-access (a compromised account) also revokes
// the member's API tokens and OAuth grants when it is used; a plain link
// leaves them working, and making the link changes nothing.
func TestResetLinkRevokingAccess(t *testing.T) {
	f := newFixture(t, account.Options{})
	m := f.member("alice")
	_, apiToken, err := apitokens.Of(f.store).Create(t.Context(), m.ID, "Obsidian", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := grants.Of(f.store).CreateApp(t.Context(), "Toot", "", []string{"urn:ietf:wg:oauth:2.0:oob"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	grant := func() string {
		t.Helper()
		code, err := grants.Of(f.store).CreateCode(t.Context(), app.ClientID, m, "urn:ietf:wg:oauth:2.0:oob", []string{"read"}, "")
		if err != nil {
			t.Fatal(err)
		}
		_, secret, err := grants.Of(f.store).ExchangeCode(t.Context(), code, func(*grants.Code) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	oauthToken := grant()
	reset := func(opts members.ResetLinkOptions, pw string) {
		t.Helper()
		token, _, _, err := members.Of(f.store).CreateResetLink(t.Context(), "alice", time.Hour, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := apitokens.Of(f.store).Member(t.Context(), apiToken); err != nil {
			t.Fatalf("making a link revoked the API token: %v", err)
		}
		r := f.post(f.browser(), "/auth/reset/"+token, url.Values{"password": {pw}, "password_confirmation": {pw}})
		wantStatus(t, r, http.StatusOK)
		wantBody(t, r, "Your new password is set")
	}

	reset(members.ResetLinkOptions{}, "a new password")
	if _, _, err := apitokens.Of(f.store).Member(t.Context(), apiToken); err != nil {
		t.Fatalf("a plain link revoked the API token: %v", err)
	}
	if _, _, err := grants.Of(f.store).Token(t.Context(), oauthToken); err != nil {
		t.Fatalf("a plain link revoked the OAuth grant: %v", err)
	}

	reset(members.ResetLinkOptions{RevokeAccess: true}, "a third password")
	if _, _, err := apitokens.Of(f.store).Member(t.Context(), apiToken); err == nil {
		t.Fatal("the API token still works after a --revoke-access link")
	}
	if _, _, err := grants.Of(f.store).Token(t.Context(), oauthToken); err == nil {
		t.Fatal("the OAuth access token still works after a --revoke-access link")
	}
	if apps, err := grants.Of(f.store).AuthorizedApps(t.Context(), m.ID); err != nil || len(apps) != 0 {
		t.Fatalf("authorized apps after a --revoke-access link: %+v %v", apps, err)
	}
	if _, err := members.Of(f.store).Authenticate(t.Context(), "alice", "a third password"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
}

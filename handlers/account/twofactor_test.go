package account_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

var (
	secretRE   = regexp.MustCompile(`<code class="secret" id="totp-key" data-copy>([A-Z2-7]+)</code>`)
	recoveryRE = regexp.MustCompile(`<li><code>([a-z2-9]{5}-[a-z2-9]{5})</code></li>`)
)

func totpAt(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	code, err := members.TOTPCode(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// enableTwoFactor turns two-factor sign-in on through the account page and
// returns the key and the recovery codes it showed.
// shownRecoveryCodes are the recovery codes page r lists, a full set.
func shownRecoveryCodes(t *testing.T, r resp) []string {
	t.Helper()
	var codes []string
	for _, m := range recoveryRE.FindAllStringSubmatch(r.body, -1) {
		codes = append(codes, m[1])
	}
	if len(codes) != members.RecoveryCodeCount {
		t.Fatalf("%d recovery codes shown:\n%s", len(codes), r.body)
	}
	return codes
}

// aliceWithTwoFactor makes the member alice and turns two-factor sign-in
// on for her; it returns the browser that did it (signed in) and her
// recovery codes.
func (f *fixture) aliceWithTwoFactor() (*http.Client, []string) {
	f.t.Helper()
	f.member("alice")
	c := f.signedIn("alice")
	_, codes := f.enableTwoFactor(c)
	return c, codes
}

func (f *fixture) enableTwoFactor(c *http.Client) (string, []string) {
	f.t.Helper()
	secret, _, codes := f.enableTwoFactorWithCode(c)
	return secret, codes
}

// enableTwoFactorWithCode is enableTwoFactor that also returns the code
// that confirmed it.
func (f *fixture) enableTwoFactorWithCode(c *http.Client) (secret, confirmed string, codes []string) {
	t := f.t
	t.Helper()
	r := f.get(c, "/settings/account")
	wantBody(t, r, "Two-factor sign-in is <strong>off</strong>")
	wantStatus(t, f.post(c, "/settings/account/two_factor/start", url.Values{"current_password": {"wrong password"}}), http.StatusUnauthorized)
	r = f.post(c, "/settings/account/two_factor/start", url.Values{"current_password": {password}})
	wantStatus(t, r, http.StatusSeeOther)
	r = f.get(c, "/settings/account")
	m := secretRE.FindStringSubmatch(r.body)
	if m == nil {
		t.Fatalf("no key on the setup page:\n%s", r.body)
	}
	secret = m[1]
	wantBody(t, r, `href="otpauth://totp/Hearth:alice@127.0.0.1?algorithm=SHA1&amp;digits=6&amp;issuer=Hearth&amp;period=30&amp;secret=`+secret+`"`)
	wantBody(t, r, `src="data:image/png;base64,`)
	// A wrong code leaves it off.
	wrong := "000000"
	if wrong == totpAt(t, secret, time.Now()) {
		wrong = "111111"
	}
	r = f.post(c, "/settings/account/two_factor/confirm", url.Values{"code": {wrong}})
	wantStatus(t, r, http.StatusUnauthorized)
	wantBody(t, r, "That code is not right.")
	confirmed = totpAt(t, secret, time.Now())
	r = f.post(c, "/settings/account/two_factor/confirm", url.Values{"code": {confirmed}})
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "Two-factor sign-in is on.")
	codes = shownRecoveryCodes(t, r)
	r = f.get(c, "/settings/account")
	if recoveryRE.MatchString(r.body) || strings.Contains(r.body, secret) {
		t.Fatal("the recovery codes or the key are shown again")
	}
	wantBody(t, r, "You have 10 recovery codes left.")
	return secret, confirmed, codes
}

func TestTwoFactorSignIn(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	secret, confirmed, codes := f.enableTwoFactorWithCode(f.signedIn("alice"))

	// The password alone signs nobody in.
	c := f.browser()
	r := f.signIn(c, "alice", password, "/settings/api_tokens")
	wantRedirect(t, r, "/auth/two_factor?return_to=%2Fsettings%2Fapi_tokens")
	if sessionCookie(r) != nil {
		t.Fatal("a session cookie before the code")
	}
	wantStatus(t, f.get(c, "/settings"), http.StatusSeeOther)
	wantStatus(t, f.get(c, "/settings/account"), http.StatusSeeOther)
	page := f.get(c, r.Header.Get("Location"))
	wantStatus(t, page, http.StatusOK)
	wantBody(t, page, `name="code"`)

	// The code that turned it on was used: refused (that code itself, not
	// the code of now, which is another once a step boundary has passed).
	r = f.post(c, "/auth/two_factor", url.Values{"code": {confirmed}, "return_to": {"/settings/api_tokens"}})
	wantStatus(t, r, http.StatusUnauthorized)
	if !strings.Contains(r.body, "That code was already used.") && !strings.Contains(r.body, "That code is not right.") {
		t.Fatalf("reused code:\n%s", r.body)
	}
	next := totpAt(t, secret, time.Now().Add(30*time.Second))
	r = f.post(c, "/auth/two_factor", url.Values{"code": {next}, "return_to": {"/settings/api_tokens"}})
	wantRedirect(t, r, "/settings/api_tokens")
	wantStatus(t, f.get(c, "/settings/api_tokens"), http.StatusOK)

	// The same code again, from another browser: refused.
	c2 := f.browser()
	wantStatus(t, f.signIn(c2, "alice", password, ""), http.StatusSeeOther)
	r = f.post(c2, "/auth/two_factor", url.Values{"code": {next}})
	wantStatus(t, r, http.StatusUnauthorized)
	wantBody(t, r, "That code was already used.")
	// A recovery code works once.
	r = f.post(c2, "/auth/two_factor", url.Values{"code": {strings.ToUpper(codes[0])}})
	wantStatus(t, r, http.StatusSeeOther)
	wantStatus(t, f.get(c2, "/settings"), http.StatusOK)
	c3 := f.browser()
	wantStatus(t, f.signIn(c3, "alice", password, ""), http.StatusSeeOther)
	wantStatus(t, f.post(c3, "/auth/two_factor", url.Values{"code": {codes[0]}}), http.StatusUnauthorized)

	// Without a challenge (no password first, or a made-up one), the code
	// page sends back to sign-in.
	c4 := f.browser()
	r = f.post(c4, "/auth/two_factor", url.Values{"code": {codes[1]}})
	wantStatus(t, r, http.StatusUnauthorized)
	wantBody(t, r, "Sign in again.")
	if sessionCookie(r) != nil {
		t.Fatal("a session without a challenge")
	}
	u, _ := url.Parse(f.srv.URL + "/auth/two_factor")
	c4.Jar.SetCookies(u, []*http.Cookie{{Name: "hearth_2fa", Value: "h2f_" + strings.Repeat("A", 43), Path: "/auth/two_factor"}})
	wantStatus(t, f.post(c4, "/auth/two_factor", url.Values{"code": {codes[1]}}), http.StatusUnauthorized)
	if on, left, _ := members.Of(f.store).TwoFactorStatus(t.Context(), f.mustMember("alice").ID); !on || left != members.RecoveryCodeCount-1 {
		t.Fatalf("a code was used up without a challenge: %v %d", on, left)
	}
}

func (f *fixture) mustMember(name string) *members.Member {
	m, err := members.Of(f.store).Member(context.Background(), name)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// Wrong codes count against the member's and the address's sign-in
// failure limits, and a challenge ends after five wrong codes.
func TestTwoFactorCodeIsRateLimited(t *testing.T) {
	f := newFixture(t, account.Options{FailuresPerUsername: 10})
	_, codes := f.aliceWithTwoFactor()
	c := f.browser()
	wantStatus(t, f.signIn(c, "alice", password, ""), http.StatusSeeOther)
	for range members.MaxChallengeAttempts - 1 {
		wantStatus(t, f.post(c, "/auth/two_factor", url.Values{"code": {"zzzzz-zzzzz"}}), http.StatusUnauthorized)
	}
	wantStatus(t, f.post(c, "/auth/two_factor", url.Values{"code": {"zzzzz-zzzzz"}}), http.StatusUnauthorized)
	r := f.post(c, "/auth/two_factor", url.Values{"code": {codes[0]}})
	wantStatus(t, r, http.StatusUnauthorized)
	wantBody(t, r, "Sign in again.")
	// The right password does not forget the wrong codes: setting up had
	// two failures (a wrong password, a wrong code), the first challenge
	// five; three more on a new challenge reach the member's limit (10),
	// and then even a right code waits.
	wantStatus(t, f.signIn(c, "alice", password, ""), http.StatusSeeOther)
	for range 3 {
		wantStatus(t, f.post(c, "/auth/two_factor", url.Values{"code": {"zzzzz-zzzzz"}}), http.StatusUnauthorized)
	}
	r = f.post(c, "/auth/two_factor", url.Values{"code": {codes[0]}})
	wantStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	if _, left, _ := members.Of(f.store).TwoFactorStatus(t.Context(), f.mustMember("alice").ID); left != members.RecoveryCodeCount {
		t.Fatalf("a recovery code was used while limited: %d left", left)
	}
}

func TestTwoFactorDisable(t *testing.T) {
	f := newFixture(t, account.Options{})
	c, codes := f.aliceWithTwoFactor()
	r := f.post(c, "/settings/account/two_factor/disable", url.Values{"current_password": {password}, "code": {"zzzzz-zzzzz"}})
	wantStatus(t, r, http.StatusUnauthorized)
	wantBody(t, r, "That code is not right.")
	r = f.post(c, "/settings/account/two_factor/disable", url.Values{"current_password": {"wrong password"}, "code": {codes[2]}})
	wantStatus(t, r, http.StatusUnauthorized)
	if on, _, _ := members.Of(f.store).TwoFactorStatus(t.Context(), f.mustMember("alice").ID); !on {
		t.Fatal("turned off by a refused form")
	}
	r = f.post(c, "/settings/account/two_factor/disable", url.Values{"current_password": {password}, "code": {codes[2]}})
	wantStatus(t, r, http.StatusSeeOther)
	wantBody(t, f.get(c, r.Header.Get("Location")), "Two-factor sign-in is off.")
	// The password alone signs in again.
	c2 := f.browser()
	r = f.signIn(c2, "alice", password, "")
	wantStatus(t, r, http.StatusSeeOther)
	if r.Header.Get("Location") != "/settings" || sessionCookie(r) == nil {
		t.Fatalf("sign-in after turning off: %q", r.Header.Get("Location"))
	}
}

func TestTwoFactorPageRefusesBigBodies(t *testing.T) {
	f := newFixture(t, account.Options{MaxFormBytes: 1024})
	_, codes := f.aliceWithTwoFactor()
	c := f.browser()
	wantStatus(t, f.signIn(c, "alice", password, ""), http.StatusSeeOther)
	r := f.post(c, "/auth/two_factor", url.Values{"code": {codes[0]}, "pad": {strings.Repeat("x", 2000)}})
	wantStatus(t, r, http.StatusRequestEntityTooLarge)
	if sessionCookie(r) != nil {
		t.Fatal("signed in by a refused form")
	}
}

func TestNewRecoveryCodes(t *testing.T) {
	f := newFixture(t, account.Options{})
	c, codes := f.aliceWithTwoFactor()
	r := f.post(c, "/settings/account/two_factor/recovery_codes", url.Values{"current_password": {password}, "code": {"zzzzz-zzzzz"}})
	wantStatus(t, r, http.StatusUnauthorized)
	r = f.post(c, "/settings/account/two_factor/recovery_codes", url.Values{"current_password": {password}, "code": {codes[0]}})
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "Your new recovery codes are below")
	fresh := shownRecoveryCodes(t, r)
	wantBody(t, f.get(c, "/settings/account"), "You have 10 recovery codes left.")
	// The old codes stopped working; a new one signs in.
	b := f.browser()
	wantStatus(t, f.signIn(b, "alice", password, ""), http.StatusSeeOther)
	wantStatus(t, f.post(b, "/auth/two_factor", url.Values{"code": {codes[1]}}), http.StatusUnauthorized)
	wantStatus(t, f.post(b, "/auth/two_factor", url.Values{"code": {fresh[0]}}), http.StatusSeeOther)
}

// Turning two-factor sign-in on ends the member's other sessions, as a
// password change does: a session someone started with the password alone
// must not outlive the second factor. The browser that turned it on stays
// signed in.
func TestTurningTwoFactorOnEndsOtherSessions(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	other := f.signedIn("alice")
	wantStatus(t, f.get(other, "/settings/account"), http.StatusOK)
	c := f.signedIn("alice")
	f.enableTwoFactor(c)
	wantStatus(t, f.get(c, "/settings/account"), http.StatusOK)
	wantStatus(t, f.get(other, "/settings/account"), http.StatusSeeOther)
	if list, err := members.Of(f.store).Sessions(t.Context(), f.mustMember("alice").ID); err != nil || len(list) != 1 {
		t.Fatalf("%d sessions after turning two-factor sign-in on, want 1 (%v)", len(list), err)
	}
}

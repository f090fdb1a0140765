//go:build browser

package browser

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

	"github.com/hearthkit/caddy-hearth/internal/testcaddy"
)

// The passkey site is reached as localhost: WebAuthn takes no IP address
// as an RP ID, and http://localhost is a secure context for Chromium.
const passkeySite = "http://localhost:18280"

func passkeyCaddyfile(dir string) string {
	return testcaddy.GlobalOptions(admin, dir, "") + fmt.Sprintf(`%s {
	bind 127.0.0.1
	hearth_oauth {
		instance_title %q
	}
}
`, passkeySite, siteTitle)
}

// TestPasskeysInChromium: passkeys in Chromium with the DevTools virtual
// authenticator (a CTAP2 platform authenticator that keeps discoverable
// credentials and verifies the person): add one on the account page, sign
// in with it without a username, use it as the second factor after the
// password, remove it; axe-core checks each new state of the pages.
func TestPasskeysInChromium(t *testing.T) {
	dir := t.TempDir()
	testcaddy.Start(t, passkeyCaddyfile(dir))
	testcaddy.AddMember(t, admin, member, password)
	s := newSuite(t)
	s.base = passkeySite

	var authID webauthn.AuthenticatorID
	s.run("add a virtual authenticator", webauthn.Enable(), chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		authID, err = webauthn.AddVirtualAuthenticator(&webauthn.VirtualAuthenticatorOptions{
			Protocol:                    webauthn.AuthenticatorProtocolCtap2,
			Ctap2version:                webauthn.Ctap2versionCtap21,
			Transport:                   webauthn.AuthenticatorTransportInternal,
			HasResidentKey:              true,
			HasUserVerification:         true,
			IsUserVerified:              true,
			AutomaticPresenceSimulation: true,
		}).Do(ctx)
		return err
	}))
	// Chromium's virtual authenticator answers a conditional request (the
	// passkeys the browser offers in the username field's autofill) at
	// once, where a person would pick one: while the buttons are tested,
	// the pages see a browser without conditional mediation (as Firefox
	// before 119), and the autofill path is walked on its own below.
	var noAutofill page.ScriptIdentifier
	withoutAutofill := func() {
		s.run("a browser without conditional mediation", chromedp.ActionFunc(func(ctx context.Context) error {
			var err error
			noAutofill, err = page.AddScriptToEvaluateOnNewDocument(`PublicKeyCredential.isConditionalMediationAvailable = () => Promise.resolve(false);`).Do(ctx)
			return err
		}))
	}
	withoutAutofill()
	credentials := func() int {
		var n int
		s.run("read the authenticator", chromedp.ActionFunc(func(ctx context.Context) error {
			creds, err := webauthn.GetCredentials(authID).Do(ctx)
			n = len(creds)
			return err
		}))
		return n
	}

	// Add a passkey on the account page.
	s.signIn(member, password)
	s.open("/settings/account")
	s.waitFor("the passkey form shown by passkey.js", `!document.getElementById("passkeys-add").hidden`)
	s.run("open Add a passkey", chromedp.Click("#passkeys-add summary", chromedp.ByQuery))
	s.check("account-passkeys-none")
	s.run("name the passkey", chromedp.SendKeys("#passkey_name", "Laptop", chromedp.ByID))
	s.submit(`form[data-passkey-create] button[type=submit]`)
	if loc := s.location(); loc != passkeySite+"/settings/account?done=passkey_added#passkeys-heading" {
		t.Fatalf("after adding a passkey: %s (%s)", loc, s.text("main"))
	}
	if got := s.text(`td[data-label="Name"]`); got != "Laptop" {
		t.Fatalf("the passkey is listed as %q", got)
	}
	if n := credentials(); n != 1 {
		t.Fatalf("the authenticator holds %d credentials, want 1 (resident)", n)
	}
	s.check("account-passkey")

	// Sign out; sign in with the passkey alone: no username typed.
	s.signOut()
	s.openPasskeySignIn()
	s.check("sign-in-passkey")
	s.passkeyClick("#passkey-sign-in")
	if loc := s.location(); loc != passkeySite+"/settings" {
		t.Fatalf("after signing in with the passkey: %s", loc)
	}
	if got := s.text("header.site summary"); !strings.Contains(got, "@"+member) {
		t.Fatalf("signed in as %q", got)
	}

	// The browser's autofill: the sign-in page asks for a passkey as it
	// opens (mediation "conditional"), and the authenticator's answer
	// signs the member in without a click.
	s.signOut()
	s.run("conditional mediation back", chromedp.ActionFunc(func(ctx context.Context) error {
		return page.RemoveScriptToEvaluateOnNewDocument(noAutofill).Do(ctx)
	}))
	s.run("open the sign-in page", chromedp.Navigate(passkeySite+"/auth/sign_in"))
	s.waitAcross("signed in through the autofill's passkey", `location.pathname === "/settings" && !!document.querySelector("main")`)
	withoutAutofill()

	// Two-factor sign-in on: after the password, the passkey answers for
	// the code.
	s.open("/settings/account")
	s.run("type the password", chromedp.SendKeys("#start_password", password, chromedp.ByID))
	s.submit(`form[action="/settings/account/two_factor/start"] button[type=submit]`)
	code, err := totp.GenerateCode(s.text("#totp-key"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.run("type the code", chromedp.SendKeys("#confirm_code", code, chromedp.ByID))
	s.submit(`form[action="/settings/account/two_factor/confirm"] button[type=submit]`)
	s.signOut()
	s.open("/auth/sign_in")
	s.run("type the password",
		chromedp.SendKeys("#username", member, chromedp.ByID),
		chromedp.SendKeys("#password", password, chromedp.ByID))
	s.submit(`main form button[type=submit]`)
	if loc := s.location(); !strings.HasPrefix(loc, passkeySite+"/auth/two_factor") {
		t.Fatalf("with two-factor sign-in on, the password leads to %s", loc)
	}
	s.waitFor("the passkey button shown by passkey.js", `!document.getElementById("passkey-second-factor").hidden`)
	s.check("two-factor-passkey")
	s.passkeyClick("#passkey-second-factor")
	if loc := s.location(); loc != passkeySite+"/settings" {
		t.Fatalf("after the passkey as second factor: %s", loc)
	}

	// Remove it: it signs nobody in any more, and the page says why.
	s.open("/settings/account")
	s.submit(`form[action="/settings/account/passkeys/remove"] button[type=submit]`)
	if loc := s.location(); loc != passkeySite+"/settings/account?done=passkey_removed" {
		t.Fatalf("after removing the passkey: %s", loc)
	}
	if got := s.text(`#passkeys-none`); got != "You have no passkey." {
		t.Fatalf("after removing: %q", got)
	}
	s.check("account-passkey-removed")
	s.signOut()
	s.openPasskeySignIn()
	s.run("use the removed passkey", chromedp.Evaluate(`document.getElementById("passkey-sign-in").click()`, nil))
	s.waitFor("the refusal", `document.getElementById("passkey-status").textContent !== "" && !document.getElementById("passkey-status").hidden`)
	if loc := s.location(); !strings.HasPrefix(loc, passkeySite+"/auth/sign_in") {
		t.Fatalf("the removed passkey led to %s", loc)
	}
	s.check("sign-in-passkey-refused")
}

// openPasskeySignIn opens the sign-in page and waits for passkey.js to show
// its passkey button.
func (s *suite) openPasskeySignIn() {
	s.t.Helper()
	s.open("/auth/sign_in")
	s.waitFor("the passkey button shown by passkey.js", `!document.getElementById("passkey-sign-in").hidden`)
}

// passkeyClick presses a passkey button (the virtual authenticator
// answers at once) and waits for the page it leads to.
func (s *suite) passkeyClick(sel string) {
	s.t.Helper()
	var before string
	s.run("read location", chromedp.Evaluate(`String(performance.timeOrigin)`, &before))
	s.run("click "+sel, chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).click()`, sel), nil))
	s.awaitNewPage(before, "the passkey of "+sel)
}

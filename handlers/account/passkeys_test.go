package account_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/internal/softauthn"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// The passkey ceremonies as a browser runs them (passkey.js): options from
// the site, the authenticator's answer (internal/softauthn: real ES256
// keys, CBOR and signatures) posted back as JSON. WebAuthn refuses IP
// addresses as RP IDs, so the site is reached as localhost.

// origin is the test site as a browser on localhost sees it.
func (f *fixture) origin() string { return strings.Replace(f.srv.URL, "127.0.0.1", "localhost", 1) }

// postJSON posts body to path as passkey.js does (same-origin fetch).
func (f *fixture) postJSON(c *http.Client, path string, body []byte) (resp, map[string]any) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.origin()+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", f.origin())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	r := do(f.t, c, req)
	var out map[string]any
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal([]byte(r.body), &out); err != nil {
			f.t.Fatalf("%s: %v in %s", path, err, r.body)
		}
	}
	return r, out
}

func (f *fixture) localGet(c *http.Client, path string) resp {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.origin()+path, nil)
	return do(f.t, c, req)
}

func (f *fixture) localPost(c *http.Client, path string, form url.Values) resp {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.origin()+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(f.t, c, req)
}

// localSignIn signs username in with the password on localhost.
func (f *fixture) localSignIn(username string) *http.Client {
	f.t.Helper()
	c := f.browser()
	r := f.localPost(c, account.SignInPath, url.Values{"username": {username}, "password": {password}})
	wantStatus(f.t, r, http.StatusSeeOther)
	return c
}

// signedInHere reports whether c's session opens the account page.
func (f *fixture) signedInHere(c *http.Client) bool {
	f.t.Helper()
	return f.localGet(c, account.AccountPath).StatusCode == http.StatusOK
}

// options asks path for ceremony options and returns them as sent.
func (f *fixture) options(c *http.Client, path string) []byte {
	f.t.Helper()
	r, _ := f.postJSON(c, path, []byte("{}"))
	wantStatus(f.t, r, http.StatusOK)
	return []byte(r.body)
}

// addPasskey registers a passkey of a on c's account, named name.
func (f *fixture) addPasskey(c *http.Client, a *softauthn.Authenticator, name string) (resp, map[string]any) {
	f.t.Helper()
	cred, err := a.Create(f.options(c, account.AccountPath+"/passkeys/options"), f.origin())
	if err != nil {
		f.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"name": name, "credential": json.RawMessage(cred)})
	return f.postJSON(c, account.AccountPath+"/passkeys/add", body)
}

// sessionAMR is how c's session signed in, as the store keeps it (the
// OpenID provider's amr claim and hearth_gate read it).
func (f *fixture) sessionAMR(c *http.Client) []string {
	f.t.Helper()
	u, _ := url.Parse(f.origin())
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == account.CookieName {
			_, sess, err := members.Of(f.store).SessionAndMember(f.t.Context(), ck.Value)
			if err != nil {
				f.t.Fatal(err)
			}
			return sess.AMR
		}
	}
	f.t.Fatal("no session cookie")
	return nil
}

func TestPasskeyRegisterSignInWithoutUsernameAndRemove(t *testing.T) {
	f := newFixture(t, account.Options{})
	f.member("alice")
	f.member("bob")
	c := f.localSignIn("alice")
	other := f.localSignIn("alice")
	phone := &softauthn.Authenticator{UserVerified: true}

	// The page offers it, with its script allowed by the policy.
	r := f.localGet(c, account.AccountPath)
	wantBody(t, r, `id="passkeys-heading"`)
	wantBody(t, r, `data-passkey-create`)
	if !strings.Contains(r.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
		t.Fatalf("the account page's policy lets passkey.js reach nothing: %s", r.Header.Get("Content-Security-Policy"))
	}

	r, out := f.addPasskey(c, phone, "  My phone ")
	wantStatus(t, r, http.StatusOK)
	if out["redirect"] != account.AccountPath+"?done=passkey_added#passkeys-heading" {
		t.Fatalf("after adding: %v", out)
	}
	// A change of credentials: the other browser is signed out, this one
	// stays.
	if f.signedInHere(other) || !f.signedInHere(c) {
		t.Fatal("adding a passkey did not end the other session only")
	}
	r = f.localGet(c, account.AccountPath+"?done=passkey_added")
	wantBody(t, r, "The passkey was added.")
	wantBody(t, r, `<td data-label="Name">My phone</td>`)
	// The same authenticator again is excluded.
	if _, err := phone.Create(f.options(c, account.AccountPath+"/passkeys/options"), f.origin()); err != softauthn.ErrExcluded {
		t.Fatalf("the options exclude nothing the authenticator holds: %v", err)
	}

	// Sign in with no username: the passkey names the member.
	fresh := f.browser()
	assertion, err := phone.Get(f.options(fresh, account.PasskeySignInOptionsPath), f.origin())
	if err != nil {
		t.Fatal(err)
	}
	r, out = f.postJSON(fresh, account.PasskeySignInPath+"?return_to=%2Fsettings%2Fapi_tokens", assertion)
	wantStatus(t, r, http.StatusOK)
	if out["redirect"] != "/settings/api_tokens" {
		t.Fatalf("after the passkey: %v", out)
	}
	if !f.signedInHere(fresh) {
		t.Fatal("the passkey signed nobody in")
	}
	if got := f.sessionAMR(fresh); !slices.Equal(got, []string{"hwk", "mfa"}) {
		t.Fatalf("amr of a passkey sign-in: %v", got)
	}
	if !strings.Contains(f.localGet(fresh, account.AccountPath).body, "@alice") {
		t.Fatal("the passkey signed in someone other than alice")
	}
	// The same answer again: the ceremony is over.
	r, out = f.postJSON(f.browser(), account.PasskeySignInPath, assertion)
	wantStatus(t, r, http.StatusBadRequest)
	if out["error"] == nil {
		t.Fatalf("a replayed answer: %s", r.body)
	}

	// Origins are strict: an answer made for another origin or RP ID is
	// refused and signs nobody in.
	for _, tc := range []struct{ name, rpID, origin string }{
		{"another origin", "localhost", "https://evil.example"},
		{"another port", "localhost", strings.Replace(f.origin(), "localhost:", "localhost:1", 1)},
		{"another RP ID", "evil.example", f.origin()},
	} {
		b := f.browser()
		var o struct {
			PublicKey struct {
				Challenge string `json:"challenge"`
			} `json:"publicKey"`
		}
		_ = json.Unmarshal(f.options(b, account.PasskeySignInOptionsPath), &o)
		answer, err := phone.Sign(phone.Credentials()[0], o.PublicKey.Challenge, tc.rpID, tc.origin)
		if err != nil {
			t.Fatal(err)
		}
		r, _ = f.postJSON(b, account.PasskeySignInPath, answer)
		wantStatus(t, r, http.StatusUnauthorized)
		if f.signedInHere(b) {
			t.Fatalf("%s: signed in", tc.name)
		}
	}
	// Signing in with the passkey alone needs the person verified.
	unverified := &softauthn.Authenticator{}
	bob := f.localSignIn("bob")
	if r, _ := f.addPasskey(bob, unverified, "Key"); r.StatusCode != http.StatusOK {
		t.Fatalf("an authenticator without user verification as a passkey: %d %s", r.StatusCode, r.body)
	}
	b := f.browser()
	answer, _ := unverified.Get(f.options(b, account.PasskeySignInOptionsPath), f.origin())
	r, _ = f.postJSON(b, account.PasskeySignInPath, answer)
	wantStatus(t, r, http.StatusUnauthorized)
	if f.signedInHere(b) {
		t.Fatal("a passkey without user verification signed in alone")
	}

	// Rename, then remove: the other sessions end, and the passkey signs
	// nobody in any more.
	id := members.PasskeyID(phone.Credentials()[0].ID)
	wantStatus(t, f.localPost(c, account.AccountPath+"/passkeys/rename", url.Values{"id": {id}, "name": {"Old phone"}}), http.StatusSeeOther)
	wantBody(t, f.localGet(c, account.AccountPath), `<td data-label="Name">Old phone</td>`)
	if !f.signedInHere(fresh) {
		t.Fatal("renaming a passkey ended a session")
	}
	wantStatus(t, f.localPost(c, account.AccountPath+"/passkeys/remove", url.Values{"id": {id}}), http.StatusSeeOther)
	if f.signedInHere(fresh) || !f.signedInHere(c) {
		t.Fatal("removing a passkey did not end the other session only")
	}
	r = f.localGet(c, account.AccountPath+"?done=passkey_removed")
	wantBody(t, r, "You have no passkey.")
	b = f.browser()
	answer, _ = phone.Get(f.options(b, account.PasskeySignInOptionsPath), f.origin())
	r, _ = f.postJSON(b, account.PasskeySignInPath, answer)
	wantStatus(t, r, http.StatusUnauthorized)
	wantStatus(t, f.localPost(c, account.AccountPath+"/passkeys/remove", url.Values{"id": {id}}), http.StatusNotFound)
}

// TestPasskeyNeedsARecentSignIn: a session whose password is not recent
// (taken over, or just old) can neither add nor remove a passkey.
func TestPasskeyNeedsARecentSignIn(t *testing.T) {
	f := newFixture(t, account.Options{})
	m := f.member("alice")
	id := f.session(m)
	c := f.browser()
	u, _ := url.Parse(f.origin())
	c.Jar.SetCookies(u, []*http.Cookie{{Name: account.CookieName, Value: id}})
	r := f.localGet(c, account.AccountPath)
	wantStatus(t, r, http.StatusOK)
	wantBody(t, r, "confirm it's you</a> first")
	r, out := f.postJSON(c, account.AccountPath+"/passkeys/options", []byte("{}"))
	wantStatus(t, r, http.StatusForbidden)
	if out["error"] == nil {
		t.Fatalf("refusal without a message: %s", r.body)
	}
	if keys, _ := members.Of(f.store).Passkeys(t.Context(), m.ID); len(keys) != 0 {
		t.Fatal("a passkey was added")
	}
}

func TestPasskeyAsSecondFactor(t *testing.T) {
	f := newFixture(t, account.Options{})
	_, codes := f.aliceWithTwoFactor()
	// A security key that does not verify the person: enough as the
	// second factor.
	key := &softauthn.Authenticator{}
	c := f.browser()
	r := f.localPost(c, account.SignInPath, url.Values{"username": {"alice"}, "password": {password}})
	wantStatus(t, r, http.StatusSeeOther)
	wantStatus(t, f.localPost(c, account.TwoFactorPath, url.Values{"code": {"000000"}}), http.StatusUnauthorized)
	// The code page offers no passkey yet.
	if strings.Contains(f.localGet(c, account.TwoFactorPath).body, "Use a passkey") {
		t.Fatal("the code page offers a passkey the member does not have")
	}
	r, _ = f.postJSON(c, account.TwoFactorPath+"/passkey/options", []byte("{}"))
	wantStatus(t, r, http.StatusBadRequest)
	// Sign in with a recovery code, add the key.
	signedIn := f.localTwoFactorSignIn(codes[0])
	if r, _ := f.addPasskey(signedIn, key, "Security key"); r.StatusCode != http.StatusOK {
		t.Fatalf("add the key: %d %s", r.StatusCode, r.body)
	}

	c = f.browser()
	wantStatus(t, f.localPost(c, account.SignInPath, url.Values{"username": {"alice"}, "password": {password}, "return_to": {"/settings/api_tokens"}}), http.StatusSeeOther)
	r = f.localGet(c, account.TwoFactorPath+"?return_to=%2Fsettings%2Fapi_tokens")
	wantBody(t, r, "Use a passkey instead")
	answer, err := key.Get(f.options(c, account.TwoFactorPath+"/passkey/options"), f.origin())
	if err != nil {
		t.Fatal(err)
	}
	r, out := f.postJSON(c, account.TwoFactorPath+"/passkey?return_to=%2Fsettings%2Fapi_tokens", answer)
	wantStatus(t, r, http.StatusOK)
	if out["redirect"] != "/settings/api_tokens" {
		t.Fatalf("after the passkey: %v", out)
	}
	if got := f.sessionAMR(c); !slices.Equal(got, []string{"pwd", "hwk", "mfa"}) {
		t.Fatalf("amr of password and passkey: %v", got)
	}
	// The challenge is used up: the code page starts again.
	wantStatus(t, f.localGet(c, account.TwoFactorPath), http.StatusUnauthorized)

	// Without the password first, the second-factor ceremony has no member.
	r, _ = f.postJSON(f.browser(), account.TwoFactorPath+"/passkey/options", []byte("{}"))
	wantStatus(t, r, http.StatusUnauthorized)
	// Recovery codes still work as before.
	if !f.signedInHere(f.localTwoFactorSignIn(codes[1])) {
		t.Fatal("a recovery code no longer signs in")
	}
}

// localTwoFactorSignIn signs alice in with her password and code.
func (f *fixture) localTwoFactorSignIn(code string) *http.Client {
	f.t.Helper()
	c := f.browser()
	wantStatus(f.t, f.localPost(c, account.SignInPath, url.Values{"username": {"alice"}, "password": {password}}), http.StatusSeeOther)
	wantStatus(f.t, f.localPost(c, account.TwoFactorPath, url.Values{"code": {code}}), http.StatusSeeOther)
	return c
}

package caddymodule

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hearthkit/caddy-hearth/handlers/gate"
	"github.com/hearthkit/caddy-hearth/internal/softauthn"
)

// Single sign-on through a Caddy started from a Caddyfile: the OpenID
// provider with go-oidc v3.21.0 and x/oauth2 as the relying party, the
// hearth_gate directive on several subdomains of one cookie domain, and the
// forward-auth answer behind Caddy's own forward_auth. The sites are
// subdomains of hearth.localhost, which the test's clients dial on
// loopback (a .localhost host also keeps the session cookie usable over
// plain http).

const ssoHome = "http://hearth.localhost:9080"

func ssoCaddyfile(storageDir string) string {
	return testCaddyfile("", fmt.Sprintf("storage_dir %q\ncookie_domain hearth.localhost", storageDir), fmt.Sprintf(`%s {
	hearth_oauth {
		base_url %s
		signing_key_rotation 6s
		signing_key_publish_ahead 3s
	}
	handle /private/* {
		hearth_gate
		respond "private {http.request.header.Remote-User} email={http.request.header.Remote-Email}"
	}
	respond "home"
}
http://app.hearth.localhost:9080 {
	hearth_gate {
		allow_groups staff
		sign_in_url %s/auth/sign_in
	}
	respond "app user={http.request.header.Remote-User} name={http.request.header.Remote-Name} email={http.request.header.Remote-Email} groups={http.request.header.Remote-Groups} spoof={http.request.header.Remote_User} cookie={http.request.header.Cookie}"
}
http://strict.hearth.localhost:9080 {
	hearth_gate {
		require_two_factor
		sign_in_url %s/auth/sign_in
	}
	respond "strict"
}
http://passkey.hearth.localhost:9080 {
	hearth_gate {
		require_passkey
		sign_in_url %s/auth/sign_in
	}
	respond "passkey {http.request.header.Remote-User}"
}
http://auth.hearth.localhost:9080 {
	hearth_gate {
		forward_auth
		sign_in_url %s/auth/sign_in
	}
}
http://fwd.hearth.localhost:9080 {
	forward_auth 127.0.0.1:9080 {
		uri /
		header_up Host auth.hearth.localhost:9080
		copy_headers Remote-User Remote-Groups
	}
	respond "fwd user={http.request.header.Remote-User} groups={http.request.header.Remote-Groups}"
}
`, ssoHome, ssoHome, ssoHome, ssoHome, ssoHome, ssoHome))
}

// loopbackClient dials every host on 127.0.0.1, keeping the port.
func loopbackClient(jar http.CookieJar) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Jar: jar,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return d.DialContext(ctx, network, "127.0.0.1:"+port)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func ssoBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, origin: ssoHome, client: loopbackClient(jar)}
}

// navigate opens an absolute URL as a browser does (Accept: text/html),
// with extra headers.
func (b *browser) navigate(u string, header ...string) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

// postJSON posts body to path as the pages' scripts do (a same-origin
// fetch) and returns the answer's body, failing unless it is status.
func (b *browser) postJSON(path string, body []byte, status int) []byte {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.abs(path), strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.origin)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	p := b.do(req)
	if p.StatusCode != status {
		b.t.Fatalf("POST %s: HTTP %d %s, want %d", path, p.StatusCode, p.body, status)
	}
	return []byte(p.body)
}

func ssoMembers(t *testing.T) {
	t.Helper()
	addr := "--address=" + testAdmin
	for _, u := range []string{"alice", "bob"} {
		if _, err := runHearth(t, u+"'s password\n", "member", "add", u, "--display-name", strings.ToUpper(u[:1])+u[1:], "--password-stdin", addr); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := runHearth(t, "", "member", "groups", "alice", "staff", "admins", addr); err != nil || !strings.Contains(out, "staff") {
		t.Fatalf("member groups: %q %v", out, err)
	}
	if _, err := runHearth(t, "", "member", "email", "alice", "alice@example.org", addr); err != nil {
		t.Fatal(err)
	}
	if _, err := runHearth(t, "", "member", "email", "bob", "bob at example", addr); err == nil {
		t.Fatal("a malformed e-mail address was accepted")
	}
}

// TestGateAndForwardAuthThroughCaddy: hearth_gate and the forward-auth
// answer, as a browser and an API client see them.
func TestGateAndForwardAuthThroughCaddy(t *testing.T) {
	startHearth(t, ssoCaddyfile(t.TempDir()))
	ssoMembers(t)
	const app = "http://app.hearth.localhost:9080"

	api := loopbackClient(nil)
	res, err := api.Get(app + "/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("API client without a session: HTTP %d, challenge %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}

	// A browser goes to sign in on the home site and comes back.
	b := ssoBrowser(t)
	p := b.navigate(app + "/dashboard?tab=1")
	want := ssoHome + "/auth/sign_in?return_to=" + url.QueryEscape(app+"/dashboard?tab=1")
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != want {
		t.Fatalf("browser without a session: HTTP %d to %q, want %q", p.StatusCode, p.Header.Get("Location"), want)
	}
	signIn := b.get(p.Header.Get("Location"))
	back := b.submit(signIn, "/auth/sign_in", url.Values{"username": {"alice"}, "password": {"alice's password"}})
	if back.StatusCode != http.StatusSeeOther || back.Header.Get("Location") != app+"/dashboard?tab=1" {
		t.Fatalf("after sign-in: HTTP %d to %q", back.StatusCode, back.Header.Get("Location"))
	}
	// Through, with the member's headers; the client's copies and the
	// session cookie never reach the app.
	p = b.navigate(app+"/dashboard", "Remote-User", "mallory", "Remote_User", "mallory", "Remote-Groups", "admins", "Cookie", "theme=dark")
	for _, s := range []string{"user=alice ", "name=Alice ", "email=alice@example.org ", "groups=admins,staff ", "spoof= ", "cookie=theme=dark"} {
		if !strings.Contains(p.body, s) {
			t.Errorf("upstream saw %q, want %q in it", p.body, s)
		}
	}
	if strings.Contains(p.body, "hearth_session") || strings.Contains(p.body, "mallory") {
		t.Errorf("upstream saw %q", p.body)
	}

	// Bob is not in staff: 403. The strict site wants two-factor sign-in.
	bob := ssoBrowser(t)
	bob.signIn("bob", "bob's password")
	if p := bob.navigate(app + "/"); p.StatusCode != http.StatusForbidden {
		t.Errorf("bob (not in staff): HTTP %d", p.StatusCode)
	}
	if p := b.navigate("http://strict.hearth.localhost:9080/"); p.StatusCode != http.StatusForbidden {
		t.Errorf("alice without two-factor on the strict site: HTTP %d", p.StatusCode)
	}

	// The passkey site wants a sign-in with a passkey: alice adds one
	// (internal/softauthn, answering for the home site's origin), and a
	// browser that signs in with it, without a username, passes there and
	// on the strict site (a passkey that verified her is two factors).
	const passkeySite = "http://passkey.hearth.localhost:9080/"
	if p := b.navigate(passkeySite); p.StatusCode != http.StatusForbidden || !strings.Contains(p.body, "passkey") {
		t.Errorf("alice signed in with a password on the passkey site: HTTP %d %q", p.StatusCode, p.body)
	}
	phone := &softauthn.Authenticator{UserVerified: true}
	cred, err := phone.Create(b.postJSON("/settings/account/passkeys/options", []byte("{}"), http.StatusOK), ssoHome)
	if err != nil {
		t.Fatal(err)
	}
	added, _ := json.Marshal(map[string]any{"name": "Phone", "credential": json.RawMessage(cred)})
	b.postJSON("/settings/account/passkeys/add", added, http.StatusOK)
	withKey := ssoBrowser(t)
	answer, err := phone.Get(withKey.postJSON("/auth/passkey/options", []byte("{}"), http.StatusOK), ssoHome)
	if err != nil {
		t.Fatal(err)
	}
	withKey.postJSON("/auth/passkey/sign_in", answer, http.StatusOK)
	for site, want := range map[string]string{passkeySite: "passkey alice", "http://strict.hearth.localhost:9080/": "strict"} {
		if p := withKey.navigate(site); p.StatusCode != http.StatusOK || p.body != want {
			t.Errorf("alice signed in with her passkey at %s: HTTP %d %q", site, p.StatusCode, p.body)
		}
	}
	if p := b.navigate(passkeySite); p.StatusCode != http.StatusForbidden {
		t.Errorf("the password session that added the passkey on the passkey site: HTTP %d", p.StatusCode)
	}

	// Forward auth, behind Caddy's own forward_auth.
	p = b.navigate("http://fwd.hearth.localhost:9080/x", "Remote-User", "mallory")
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, "fwd user=alice groups=admins,staff") {
		t.Errorf("forward_auth with a session: HTTP %d %q", p.StatusCode, p.body)
	}
	res, err = api.Get("http://fwd.hearth.localhost:9080/x")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("forward_auth without a session: HTTP %d", res.StatusCode)
	}
	if p := ssoBrowser(t).navigate("http://fwd.hearth.localhost:9080/x"); p.StatusCode != http.StatusSeeOther ||
		!strings.HasPrefix(p.Header.Get("Location"), ssoHome+"/auth/sign_in?return_to="+url.QueryEscape("http://fwd.hearth.localhost:9080/x")) {
		t.Errorf("forward_auth, browser without a session: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}

	// The gate on the home site signs in there.
	p = ssoBrowser(t).navigate(ssoHome + "/private/notes")
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/auth/sign_in?return_to="+url.QueryEscape("/private/notes") {
		t.Errorf("same-site gate: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.navigate(ssoHome + "/private/notes"); !strings.Contains(p.body, "private alice") {
		t.Errorf("same-site gate with a session: %q", p.body)
	}

	// A suspension ends the session: once the gate's last read of it is
	// gate.SessionCacheTTL old, the next request does not pass.
	if _, err := runHearth(t, "", "member", "suspend", "alice", "--address="+testAdmin); err != nil {
		t.Fatal(err)
	}
	time.Sleep(gate.SessionCacheTTL)
	if p := b.navigate(app + "/dashboard"); p.StatusCode != http.StatusSeeOther {
		t.Errorf("after suspension: HTTP %d %q", p.StatusCode, p.body)
	}
}

// TestGatePassesOnlyAVerifiedEmail: Remote-Email, upstream and in the
// forward-auth answer, is an address the operator verified, never one a
// member typed on /settings/email: bob takes alice's address as his own
// there, and the apps behind the gate do not learn it (one that finds its
// accounts by address would have given him hers). Once the operator
// vouches for an address of his, it passes.
func TestGatePassesOnlyAVerifiedEmail(t *testing.T) {
	startHearth(t, ssoCaddyfile(t.TempDir()))
	ssoMembers(t)
	const forwardAuth = "http://auth.hearth.localhost:9080/"
	bob := ssoBrowser(t)
	bob.signIn("bob", "bob's password")
	settings := bob.get("/settings/email")
	if p := bob.submit(settings, "/settings/email", url.Values{"email": {"alice@example.org"}}); p.StatusCode != http.StatusOK {
		t.Fatalf("bob sets his own address: HTTP %d %q", p.StatusCode, p.body)
	}
	seen := func(b *browser, who, email string) {
		t.Helper()
		if p := b.navigate(ssoHome + "/private/notes"); p.StatusCode != http.StatusOK || p.body != "private "+who+" email="+email {
			t.Errorf("%s through the gate: HTTP %d %q, want email %q", who, p.StatusCode, p.body, email)
		}
		p := b.navigate(forwardAuth)
		if p.StatusCode != http.StatusOK || p.Header.Get("Remote-User") != who || p.Header.Get("Remote-Email") != email {
			t.Errorf("%s at forward auth: HTTP %d, Remote-User %q, Remote-Email %q, want %q", who, p.StatusCode,
				p.Header.Get("Remote-User"), p.Header.Get("Remote-Email"), email)
		}
	}
	seen(bob, "bob", "")
	alice := ssoBrowser(t)
	alice.signIn("alice", "alice's password")
	seen(alice, "alice", "alice@example.org")

	if _, err := runHearth(t, "", "member", "email", "bob", "bob@example.org", "--address="+testAdmin); err != nil {
		t.Fatal(err)
	}
	time.Sleep(gate.SessionCacheTTL) // the gate's last read of bob's session
	seen(bob, "bob", "bob@example.org")
}

var clientIDRE = regexp.MustCompile(`client_id:\s+(\S+)`)
var clientSecretRE = regexp.MustCompile(`client_secret:\s+(\S+)`)

// TestOIDCThroughCaddy: a client registered with caddy hearth client add,
// then go-oidc's discovery, the code flow with PKCE and a nonce, the ID
// token verified against the JWKS, userinfo, refresh with rotation and
// reuse detection, RP-initiated logout, and key rotation (every 6 s here)
// while tokens live.
func TestOIDCThroughCaddy(t *testing.T) {
	startHearth(t, ssoCaddyfile(t.TempDir()))
	ssoMembers(t)
	out, err := runHearth(t, "", "client", "add", "Grafana", "--redirect-uri", "http://grafana.hearth.localhost:9080/login/generic_oauth",
		"--post-logout-redirect-uri", "http://grafana.hearth.localhost:9080/", "--scopes", "openid profile email groups offline_access", "--address="+testAdmin)
	if err != nil || clientIDRE.FindStringSubmatch(out) == nil || clientSecretRE.FindStringSubmatch(out) == nil {
		t.Fatalf("client add: %q %v", out, err)
	}
	id, secret := clientIDRE.FindStringSubmatch(out)[1], clientSecretRE.FindStringSubmatch(out)[1]
	if list, err := runHearth(t, "", "client", "list", "--address="+testAdmin); err != nil || !strings.Contains(list, id) || strings.Contains(list, secret) {
		t.Fatalf("client list: %q %v", list, err)
	}
	ctx := oidc.ClientContext(context.Background(), loopbackClient(nil))
	provider, err := oidc.NewProvider(ctx, ssoHome+"/")
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	conf := oauth2.Config{ClientID: id, ClientSecret: secret, Endpoint: provider.Endpoint(),
		RedirectURL: "http://grafana.hearth.localhost:9080/login/generic_oauth", Scopes: []string{"openid", "profile", "email", "groups", "offline_access"}}
	verifier := provider.Verifier(&oidc.Config{ClientID: id})
	b := ssoBrowser(t)
	b.signIn("alice", "alice's password")
	login := func() (*oauth2.Token, *oidc.IDToken, string) {
		t.Helper()
		v := oauth2.GenerateVerifier()
		p := b.get(conf.AuthCodeURL("st", oauth2.S256ChallengeOption(v), oidc.Nonce("nonce-1")))
		if p.StatusCode == http.StatusOK {
			p = b.submit(p, "/oauth/authorize", url.Values{"decision": {"approve"}})
		}
		loc, _ := url.Parse(p.Header.Get("Location"))
		if p.StatusCode != http.StatusFound || loc.Query().Get("state") != "st" {
			t.Fatalf("authorize: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
		}
		tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(v))
		if err != nil {
			t.Fatalf("exchange: %v", err)
		}
		raw, _ := tok.Extra("id_token").(string)
		idt, err := verifier.Verify(ctx, raw)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if idt.Nonce != "nonce-1" {
			t.Fatalf("nonce %q", idt.Nonce)
		}
		return tok, idt, raw
	}
	tok, idt, raw1 := login()
	ui, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	var claims struct {
		Groups []string `json:"groups"`
	}
	if err != nil || ui.Subject != idt.Subject || ui.Email != "alice@example.org" || ui.Claims(&claims) != nil || strings.Join(claims.Groups, ",") != "admins,staff" {
		t.Fatalf("userinfo: %+v %v", ui, err)
	}
	next, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Now().Add(-time.Minute)}).Token()
	if err != nil || next.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh: %v", err)
	}
	if _, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Now().Add(-time.Minute)}).Token(); err == nil ||
		!strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("reused refresh token: %v", err)
	}
	if _, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(next)); err == nil {
		t.Fatal("the family's access token works after a reuse")
	}

	// Key rotation while the first ID token lives: a later token is signed
	// by the successor, and both verify.
	kid := func(raw string) string {
		var h struct{ Kid string }
		p, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
		_ = json.Unmarshal(p, &h)
		return h.Kid
	}
	// Up to a minute: the rotation is due 6 s after the first key, but a
	// loaded machine may run its timer late. A sign-in every 1.5 s keeps a
	// minute of them under the authorize limit (60 a minute).
	var raw2 string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(1500 * time.Millisecond) {
		if _, _, raw2 = login(); kid(raw2) != kid(raw1) {
			break
		}
	}
	if kid(raw2) == kid(raw1) {
		t.Fatal("no rotation happened")
	}
	for _, raw := range []string{raw1, raw2} {
		if _, err := verifier.Verify(ctx, raw); err != nil {
			t.Errorf("after rotation: %v", err)
		}
	}

	// RP-initiated logout (the member confirms) ends the session
	// everywhere the cookie went.
	p := b.get(provider.Endpoint().AuthURL[:strings.LastIndex(provider.Endpoint().AuthURL, "/")] + "/logout?" +
		url.Values{"id_token_hint": {raw2}, "post_logout_redirect_uri": {"http://grafana.hearth.localhost:9080/"}, "state": {"bye"}}.Encode())
	if p.StatusCode != http.StatusOK {
		t.Fatalf("logout page: HTTP %d", p.StatusCode)
	}
	p = b.submit(p, "/oauth/logout", url.Values{"decision": {"sign_out"}})
	if p.StatusCode != http.StatusFound || p.Header.Get("Location") != "http://grafana.hearth.localhost:9080/?state=bye" {
		t.Fatalf("logout: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.navigate("http://app.hearth.localhost:9080/"); p.StatusCode != http.StatusSeeOther {
		t.Errorf("the gate after logout: HTTP %d", p.StatusCode)
	}
	if out, err := runHearth(t, "", "client", "remove", id, "--address="+testAdmin); err != nil || !strings.Contains(out, "removed") {
		t.Fatalf("client remove: %q %v", out, err)
	}
}

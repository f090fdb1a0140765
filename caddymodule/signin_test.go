package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

const oauthSite = testSite + " {\n\thearth_oauth\n\trespond \"the rest of the site\"\n}\n"

func TestMemberSignsInThroughCaddy(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	adminJSONOK(t, http.MethodPost, "/hearth/members",
		`{"username":"alice","password":"correct horse","display_name":"Alice"}`, http.StatusCreated, nil)

	b := newBrowser(t, testSite)
	p := b.get("/settings")
	if p.StatusCode != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/auth/sign_in") {
		t.Fatalf("settings while signed out: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
	}

	p = b.signIn("alice", "wrong password")
	if p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.body, "Wrong username or password") {
		t.Fatalf("wrong password: HTTP %d: %s", p.StatusCode, p.body)
	}
	if p := b.get("/settings"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("a wrong password signed in: HTTP %d", p.StatusCode)
	}

	p = b.signIn("alice", "correct horse")
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/settings" {
		t.Fatalf("sign-in: HTTP %d to %q: %s", p.StatusCode, p.Header.Get("Location"), p.body)
	}
	p = b.get("/settings")
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, "@alice") ||
		!strings.Contains(p.body, `href="/oauth/authorized_applications"`) {
		t.Fatalf("settings after sign-in: HTTP %d: %s", p.StatusCode, p.body)
	}

	// Other paths still reach the rest of the site.
	if p := b.get("/about"); p.StatusCode != http.StatusOK || p.body != "the rest of the site" {
		t.Fatalf("other path: HTTP %d: %q", p.StatusCode, p.body)
	}

	// Suspension ends the session and blocks signing in again.
	adminJSONOK(t, http.MethodPost, "/hearth/members/alice/suspend", "", http.StatusOK, nil)
	if p := b.get("/settings"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("suspended member still signed in: HTTP %d", p.StatusCode)
	}
	p = b.signIn("alice", "correct horse")
	if p.StatusCode != http.StatusForbidden || !strings.Contains(p.body, "suspended") {
		t.Fatalf("suspended sign-in: HTTP %d: %s", p.StatusCode, p.body)
	}
	adminJSONOK(t, http.MethodPost, "/hearth/members/alice/unsuspend", "", http.StatusOK, nil)
	if p := b.signIn("alice", "correct horse"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in after unsuspend: HTTP %d: %s", p.StatusCode, p.body)
	}
}

func TestSignInRateLimitThroughCaddy(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"bob","password":"battery staple"}`, http.StatusCreated, nil)

	b := newBrowser(t, testSite)
	for i := 1; i <= 10; i++ {
		if p := b.signIn("bob", "guess "+strconv.Itoa(i)); p.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d: HTTP %d", i, p.StatusCode)
		}
	}
	// The eleventh attempt is refused before the password is checked, even
	// when it is right.
	p := b.signIn("bob", "battery staple")
	if p.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after 10 failures: HTTP %d: %s", p.StatusCode, p.body)
	}
	if secs, err := strconv.Atoi(p.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", p.Header.Get("Retry-After"))
	}
	if p := b.get("/settings"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("rate-limited sign-in started a session: HTTP %d", p.StatusCode)
	}
	// Another member is not locked out by bob's failures.
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"carol","password":"carol's password"}`, http.StatusCreated, nil)
	if p := newBrowser(t, testSite).signIn("carol", "carol's password"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("other member: HTTP %d: %s", p.StatusCode, p.body)
	}
}

// The registration and token limits of a Caddyfile hold through Caddy, per
// client address: 429 with Retry-After and Mastodon's JSON error, and an
// exceeded token limit refuses revocations too.
func TestOAuthLimitsThroughCaddy(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), testSite+` {
	hearth_oauth {
		registration_limit 2 10m
		token_limit 3 1h
	}
}
`))
	register := url.Values{"client_name": {"Tooter"}, "redirect_uris": {"urn:ietf:wg:oauth:2.0:oob"}}
	clientID, clientSecret := registerApp(t, register)
	registerApp(t, register)
	wantTooMany := func(what string, resp *http.Response, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		secs, serr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || serr != nil || secs < 1 || string(b) != `{"error":"Too many requests"}` {
			t.Fatalf("%s: HTTP %d, Retry-After %q: %s", what, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
	resp, err := http.PostForm(testSite+"/api/v1/apps", register)
	wantTooMany("third registration", resp, err)

	grant := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {clientSecret}}
	var token string
	for i := 1; i <= 3; i++ {
		resp, err := http.PostForm(testSite+"/oauth/token", grant)
		if err != nil {
			t.Fatal(err)
		}
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		err = json.NewDecoder(resp.Body).Decode(&tok)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || tok.AccessToken == "" {
			t.Fatalf("token request %d: HTTP %d (%v)", i, resp.StatusCode, err)
		}
		token = tok.AccessToken
	}
	resp, err = http.PostForm(testSite+"/oauth/token", grant)
	wantTooMany("fourth token request", resp, err)
	resp, err = http.PostForm(testSite+"/oauth/revoke", url.Values{"client_id": {clientID}, "client_secret": {clientSecret}, "token": {token}})
	wantTooMany("revocation past the limit", resp, err)

	// The refused revocation changed nothing: the token still works.
	req, _ := http.NewRequest(http.MethodGet, testSite+"/api/v1/apps/verify_credentials", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, _ := send(t, req); resp.StatusCode != http.StatusOK {
		t.Fatalf("token after a refused revocation: HTTP %d", resp.StatusCode)
	}
}

// TestSignInLimitSurvivesReload: failed sign-ins counted before a `caddy
// reload` (admin /load) still count after it: nine failures, a reload, the
// tenth failure is still a plain failure, another reload, and then even the
// right password is refused with 429. The limiter lives in the app's
// registry, not in the handlers a reload builds again.
func TestSignInLimitSurvivesReload(t *testing.T) {
	dir := t.TempDir()
	site := func(n int) string {
		return fmt.Sprintf("%s {\n\thearth_oauth\n\trespond \"config %d\"\n}\n", testSite, n)
	}
	startHearth(t, hearthCaddyfile(dir, site(0)))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"bob","password":"battery staple"}`, http.StatusCreated, nil)
	b := newBrowser(t, testSite)
	for i := 1; i <= 9; i++ {
		if p := b.signIn("bob", "guess "+strconv.Itoa(i)); p.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d: HTTP %d", i, p.StatusCode)
		}
	}
	reloaded := func(n int) {
		t.Helper()
		loadCaddyfile(t, hearthCaddyfile(dir, site(n)))
		if p := b.get("/about"); p.body != fmt.Sprintf("config %d", n) {
			t.Fatalf("after reload %d the site answers %q", n, p.body)
		}
	}
	reloaded(1)
	if p := b.signIn("bob", "guess 10"); p.StatusCode != http.StatusUnauthorized {
		t.Fatalf("tenth failed sign-in, after a reload: HTTP %d: %s", p.StatusCode, p.body)
	}
	reloaded(2)
	p := b.signIn("bob", "battery staple")
	if p.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after 10 failures and two reloads: HTTP %d: %s", p.StatusCode, p.body)
	}
	if secs, err := strconv.Atoi(p.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", p.Header.Get("Retry-After"))
	}
}

// TestFailedCodeLimitThroughCaddyAndReload: hearth_oauth's
// failed_code_limit counts one member's failed code exchanges across a
// reload; past it the member's code gets 429 with Retry-After in OAuth's
// JSON error format, while another member's code is exchanged.
func TestFailedCodeLimitThroughCaddyAndReload(t *testing.T) {
	dir := t.TempDir()
	site := func(n int) string {
		return fmt.Sprintf("%s {\n\thearth_oauth {\n\t\tfailed_code_limit 2 1h\n\t}\n\trespond \"config %d\"\n}\n", testSite, n)
	}
	startHearth(t, hearthCaddyfile(dir, site(0)))
	const password = "correct horse"
	for _, name := range []string{"alice", "bob"} {
		adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"`+name+`","password":"`+password+`"}`, http.StatusCreated, nil)
	}
	const cb = "https://app.example/cb"
	clientID, clientSecret := registerApp(t, url.Values{"client_name": {"Tooter"}, "redirect_uris": {cb}, "scopes": {"read"}})
	authURL := testSite + "/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {cb}, "scope": {"read"}}.Encode()
	codeOf := func(b *browser, username string) string {
		t.Helper()
		p := approve(t, b, authURL, username, password)
		loc, err := url.Parse(p.Header.Get("Location"))
		if p.StatusCode != http.StatusFound || err != nil || loc.Query().Get("code") == "" {
			t.Fatalf("approval: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
		}
		return loc.Query().Get("code")
	}
	exchange := func(code, redirectURI string) (int, http.Header, map[string]any) {
		t.Helper()
		resp, err := http.PostForm(testSite+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"client_id": {clientID}, "client_secret": {clientSecret}, "redirect_uri": {redirectURI}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("token answer: HTTP %d: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, resp.Header, body
	}
	alice, bob := newBrowser(t, testSite), newBrowser(t, testSite)
	if status, _, body := exchange(codeOf(alice, "alice"), cb+"/wrong"); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("first failed exchange: HTTP %d %v", status, body)
	}
	loadCaddyfile(t, hearthCaddyfile(dir, site(1)))
	if status, _, body := exchange(codeOf(alice, "alice"), cb+"/wrong"); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("second failed exchange, after a reload: HTTP %d %v", status, body)
	}
	loadCaddyfile(t, hearthCaddyfile(dir, site(2)))
	status, h, body := exchange(codeOf(alice, "alice"), cb)
	if secs, err := strconv.Atoi(h.Get("Retry-After")); status != http.StatusTooManyRequests || body["error"] != "invalid_grant" ||
		body["error_description"] == nil || body["access_token"] != nil || err != nil || secs < 1 {
		t.Fatalf("alice's code after two failures and two reloads: HTTP %d, Retry-After %q: %v", status, h.Get("Retry-After"), body)
	}
	if status, _, body := exchange(codeOf(bob, "bob"), cb); status != http.StatusOK || body["access_token"] == nil {
		t.Fatalf("bob's code: HTTP %d %v", status, body)
	}
}

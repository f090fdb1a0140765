package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mattn/go-mastodon"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// oauthCaddyfile is a site with hearth_oauth and no subdirectives (behind
// encode, as many sites have it), with every log line (Caddy's and
// Hearth's, debug level, plus the site's access log, which records response
// headers) written to logFile.
func oauthCaddyfile(storageDir, logFile string) string {
	return testCaddyfile(fmt.Sprintf("log {\n\toutput file %q\n\tlevel DEBUG\n}", logFile), fmt.Sprintf("storage_dir %q", storageDir), fmt.Sprintf(`%s {
	log {
		output file %q
	}
	encode gzip
	hearth_oauth
	respond "site"
}
`, testSite, logFile))
}

// registerApp registers an app the way a Mastodon client does.
func registerApp(t *testing.T, form url.Values) (clientID, clientSecret string) {
	t.Helper()
	resp, err := http.PostForm(testSite+"/api/v1/apps", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var app struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &app) != nil || app.ClientSecret == "" {
		t.Fatalf("register app: HTTP %d: %s", resp.StatusCode, b)
	}
	return app.ClientID, app.ClientSecret
}

// approve opens authURL in a browser signed in as the member (signing in
// on the way) and presses Authorize on the consent page. It returns the
// answer to the approval.
func approve(t *testing.T, b *browser, authURL, username, password string) page {
	t.Helper()
	p := b.get(authURL)
	if p.StatusCode == http.StatusSeeOther && strings.HasPrefix(p.Header.Get("Location"), "/auth/sign_in") {
		signInPage := b.get(p.Header.Get("Location"))
		p = b.submit(signInPage, "/auth/sign_in", url.Values{"username": {username}, "password": {password}})
		if p.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in on the way to consent: HTTP %d: %s", p.StatusCode, p.body)
		}
		p = b.get(p.Header.Get("Location"))
	}
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, "Authorize") {
		t.Fatalf("consent page: HTTP %d: %s", p.StatusCode, p.body)
	}
	return b.submit(p, "/oauth/authorize", url.Values{"decision": {"approve"}})
}

var oobCodeRE = regexp.MustCompile(`<output id="authorization-code"><code>([^<]+)</code></output>`)

func TestOAuthClientsThroughCaddy(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "caddy.log")
	startHearth(t, oauthCaddyfile(t.TempDir(), logFile))
	const password = "correct horse battery"
	adminJSONOK(t, http.MethodPost, "/hearth/members",
		fmt.Sprintf(`{"username":"alice","password":%q,"display_name":"Alice"}`, password), http.StatusCreated, nil)
	ctx := context.Background()
	var secrets []string // every secret value the flows saw

	t.Run("x/oauth2 authorization code with PKCE", func(t *testing.T) {
		const callback = "http://127.0.0.1:7/callback"
		id, secret := registerApp(t, url.Values{"client_name": {"oauth2 app"}, "redirect_uris": {callback}, "scopes": {"read write"}})
		secrets = append(secrets, secret)
		conf := &oauth2.Config{
			ClientID: id, ClientSecret: secret, RedirectURL: callback, Scopes: []string{"read"},
			Endpoint: oauth2.Endpoint{
				AuthURL: testSite + "/oauth/authorize", TokenURL: testSite + "/oauth/token",
				AuthStyle: oauth2.AuthStyleInParams,
			},
		}
		verifier := oauth2.GenerateVerifier()
		state := "state-" + verifier[:8]
		p := approve(t, newBrowser(t, testSite), conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), "alice", password)
		loc, err := url.Parse(p.Header.Get("Location"))
		if p.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(loc.String(), callback+"?") {
			t.Fatalf("approval: HTTP %d to %q", p.StatusCode, p.Header.Get("Location"))
		}
		if loc.Query().Get("state") != state || loc.Query().Get("code") == "" {
			t.Fatalf("callback %s lacks code or state", loc)
		}
		code := loc.Query().Get("code")
		secrets = append(secrets, code)

		if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption("wrong-"+verifier)); err == nil {
			t.Fatal("exchange with a wrong verifier succeeded")
		}
		// The failed exchange consumed the code: a new attempt is needed.
		if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier)); err == nil ||
			!strings.Contains(err.Error(), "invalid_grant") {
			t.Fatalf("reuse of a consumed code: %v", err)
		}

		verifier = oauth2.GenerateVerifier()
		p = approve(t, newBrowser(t, testSite), conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), "alice", password)
		loc, _ = url.Parse(p.Header.Get("Location"))
		code = loc.Query().Get("code")
		secrets = append(secrets, code)
		tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatalf("exchange: %v", err)
		}
		secrets = append(secrets, tok.AccessToken)
		if tok.TokenType != "Bearer" || tok.RefreshToken != "" || !tok.Expiry.IsZero() || tok.Extra("scope") != "read" {
			t.Fatalf("token: %+v scope %v", tok, tok.Extra("scope"))
		}
		resp, err := conf.Client(ctx, tok).Get(testSite + "/api/v1/accounts/verify_credentials")
		if err != nil {
			t.Fatal(err)
		}
		var acct struct{ Username, Acct string }
		json.NewDecoder(resp.Body).Decode(&acct)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || acct.Username != "alice" {
			t.Fatalf("verify_credentials: HTTP %d %+v", resp.StatusCode, acct)
		}
	})

	t.Run("go-mastodon out-of-band flow, revoke", func(t *testing.T) {
		app, err := mastodon.RegisterApp(ctx, &mastodon.AppConfig{
			Server: testSite, ClientName: "go-mastodon app", Scopes: "read write follow push",
			RedirectURIs: "urn:ietf:wg:oauth:2.0:oob", Website: "https://app.example",
		})
		if err != nil {
			t.Fatalf("RegisterApp: %v", err)
		}
		secrets = append(secrets, app.ClientSecret)
		p := approve(t, newBrowser(t, testSite), app.AuthURI, "alice", password)
		m := oobCodeRE.FindStringSubmatch(p.body)
		if p.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("OOB approval: HTTP %d: %s", p.StatusCode, p.body)
		}
		code := html.UnescapeString(m[1])
		secrets = append(secrets, code)

		c := mastodon.NewClient(&mastodon.Config{Server: testSite, ClientID: app.ClientID, ClientSecret: app.ClientSecret})
		if err := c.AuthenticateToken(ctx, code, "urn:ietf:wg:oauth:2.0:oob"); err != nil {
			t.Fatalf("AuthenticateToken: %v", err)
		}
		secrets = append(secrets, c.Config.AccessToken)
		acct, err := c.GetAccountCurrentUser(ctx)
		if err != nil || acct.Username != "alice" || acct.Acct != "alice" || acct.DisplayName != "Alice" || acct.CreatedAt.IsZero() {
			t.Fatalf("GetAccountCurrentUser: %+v, %v", acct, err)
		}

		resp, err := http.PostForm(testSite+"/oauth/revoke", url.Values{
			"client_id": {app.ClientID}, "client_secret": {app.ClientSecret}, "token": {c.Config.AccessToken},
		})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "{}" {
			t.Fatalf("revoke: HTTP %d: %s", resp.StatusCode, body)
		}
		_, err = c.GetAccountCurrentUser(ctx)
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("verify_credentials after revoke: %v, want 401", err)
		}
	})

	t.Run("client_credentials", func(t *testing.T) {
		id, secret := registerApp(t, url.Values{"client_name": {"bot"}, "redirect_uris": {"urn:ietf:wg:oauth:2.0:oob"}, "scopes": {"read write:statuses"}})
		secrets = append(secrets, secret)
		cc := &clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: testSite + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}
		tok, err := cc.Token(ctx)
		if err != nil {
			t.Fatalf("client_credentials: %v", err)
		}
		secrets = append(secrets, tok.AccessToken)
		if tok.Extra("scope") != "read write:statuses" {
			t.Fatalf("app token scope %v, want the registered scopes", tok.Extra("scope"))
		}
		client := cc.Client(ctx)
		resp, err := client.Get(testSite + "/api/v1/apps/verify_credentials")
		if err != nil {
			t.Fatal(err)
		}
		var app struct{ Name string }
		json.NewDecoder(resp.Body).Decode(&app)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || app.Name != "bot" {
			t.Fatalf("apps/verify_credentials: HTTP %d %+v", resp.StatusCode, app)
		}
		resp, err = client.Get(testSite + "/api/v1/accounts/verify_credentials")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "This method requires an authenticated user") {
			t.Fatalf("app token on verify_credentials: HTTP %d: %s", resp.StatusCode, body)
		}
	})

	t.Run("metadata and instance", func(t *testing.T) {
		var meta struct {
			Issuer            string   `json:"issuer"`
			TokenEndpoint     string   `json:"token_endpoint"`
			AuthMethods       []string `json:"token_endpoint_auth_methods_supported"`
			ChallengeMethods  []string `json:"code_challenge_methods_supported"`
			GrantTypes        []string `json:"grant_types_supported"`
			RegistrationPoint string   `json:"app_registration_endpoint"`
		}
		getJSON(t, testSite+"/.well-known/oauth-authorization-server", &meta)
		if meta.Issuer != testSite+"/" || meta.TokenEndpoint != testSite+"/oauth/token" ||
			strings.Join(meta.AuthMethods, ",") != "client_secret_post" || strings.Join(meta.ChallengeMethods, ",") != "S256" ||
			strings.Join(meta.GrantTypes, ",") != "authorization_code,client_credentials" || meta.RegistrationPoint != testSite+"/api/v1/apps" {
			t.Fatalf("metadata: %+v", meta)
		}
		inst, err := mastodon.NewClient(&mastodon.Config{Server: testSite}).GetInstance(ctx)
		if err != nil || inst.URI != "localhost" || !strings.HasPrefix(inst.Version, "4.") {
			t.Fatalf("instance: %+v, %v", inst, err)
		}
	})

	// Nothing secret reached the logs, although they were at debug level
	// and the site had an access log.
	loadCaddyfile(t, fmt.Sprintf("{\n\tadmin %s\n}\n", testAdmin)) // flush and close the log file
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "/oauth/token") {
		t.Fatalf("the log file did not capture the requests:\n%.2000s", logs)
	}
	for _, s := range append(secrets, password) {
		if strings.Contains(string(logs), s) {
			t.Errorf("a secret (%.8s...) appears in the logs", s)
		}
	}
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, b)
	}
}

// TestOAuthPathsThroughCaddy: through a real Caddy, the endpoints answer
// with a trailing slash (toot 0.34 opens /oauth/authorize/, Mastodon.py
// 1.8 reads /api/v1/instance/); an /api/v1/, /api/v2/ or /oauth/ path that
// nothing serves is Mastodon's JSON 404, not Caddy's empty 200; another
// Hearth module's paths and later routes of the site still answer, and
// other paths are left alone.
func TestOAuthPathsThroughCaddy(t *testing.T) {
	site := fmt.Sprintf(`%s {
	route {
		hearth_oauth
		hearth_directory
		respond /api/v1/custom "custom"
		handle /api/v2/files/* {
			root * %q
			file_server
		}
	}
}
`, testSite, t.TempDir())
	startHearth(t, hearthCaddyfile(t.TempDir(), site))
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := noFollow.Get(testSite + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	plain, want := get("/api/v1/instance")
	slash, got := get("/api/v1/instance/")
	if plain.StatusCode != http.StatusOK || slash.StatusCode != http.StatusOK || got != want || !strings.Contains(got, `"version":"4.4.0`) {
		t.Fatalf("/api/v1/instance/: HTTP %d %s", slash.StatusCode, got)
	}
	id, _ := registerApp(t, url.Values{"client_name": {"toot"}, "redirect_uris": {"urn:ietf:wg:oauth:2.0:oob"}, "scopes": {"read write"}})
	resp, _ := get("/oauth/authorize/?" + url.Values{"response_type": {"code"}, "redirect_uri": {"urn:ietf:wg:oauth:2.0:oob"},
		"scope": {"read write"}, "client_id": {id}}.Encode())
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/auth/sign_in") {
		t.Fatalf("/oauth/authorize/: HTTP %d to %q, want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	// /api/v2/files/none: file_server's 404 error becomes the JSON 404 too.
	for _, p := range []string{"/api/v1/timelines/home", "/api/v2/search/", "/oauth/nothing", "/api/v1", "/api/v2/files/none"} {
		resp, body := get(p)
		if resp.StatusCode != http.StatusNotFound || body != `{"error":"Record not found"}` ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: HTTP %d %q %q, want the JSON 404", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if resp, body := get("/api/v1/custom"); resp.StatusCode != http.StatusOK || body != "custom" {
		t.Errorf("a later route lost /api/v1/custom: HTTP %d %q", resp.StatusCode, body)
	}
	// hearth_directory's own path under /api/v1/ is its to answer.
	if _, body := get("/api/v1/agents/register"); strings.Contains(body, "Record not found") {
		t.Errorf("/api/v1/agents/register answered by hearth_oauth: %q", body)
	}
	// Paths outside the API that nothing answers get the site's 404 page
	// (TestUnansweredPaths), not Mastodon's JSON.
	if resp, body := get("/elsewhere"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "<title>Page not found") {
		t.Errorf("/elsewhere: HTTP %d %q", resp.StatusCode, body)
	}
	if resp, body := get("/.well-known/nodeinfo/"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "/nodeinfo/2.1") {
		t.Errorf("/.well-known/nodeinfo/: HTTP %d %q", resp.StatusCode, body)
	}
}

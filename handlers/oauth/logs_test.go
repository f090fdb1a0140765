package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

// TestNoSecretsInLogs runs every flow with debug logging to a buffer and
// checks that no client secret, code, access token or password appears.
// (Every fixture also checks its logs for secret-shaped values on cleanup.)
func TestNoSecretsInLogs(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.TokenLimit = 1000 })
	f.member("alice")
	var secrets []string

	app := f.register("Tooter", "https://app.example/cb\nurn:ietf:wg:oauth:2.0:oob", "read write")
	secrets = append(secrets, app.ClientSecret)

	b := f.browser()
	// A failed sign-in, then a good one.
	p := b.get("/auth/sign_in")
	wantStatus(t, b.submit(p, "/auth/sign_in", url.Values{"username": {"alice"}, "password": {"wrong " + password}}), http.StatusUnauthorized)
	secrets = append(secrets, "wrong "+password)
	b.signIn("alice")

	// Code flow with PKCE, a replay, a wrong verifier, a decline, OOB.
	verifier := strings.Repeat("v", 50)
	q := authQuery(app, "https://app.example/cb", "read", "st")
	q.Set("code_challenge", challenge(verifier))
	q.Set("code_challenge_method", "S256")
	code := b.approve(q)
	tok := f.exchange(app, code, "https://app.example/cb", verifier)
	wantOAuthError(t, f.token(codeForm(app, code, "https://app.example/cb", verifier)), "invalid_grant")
	secrets = append(secrets, code, tok, verifier)

	code2 := b.approve(q)
	wantOAuthError(t, f.token(codeForm(app, code2, "https://app.example/cb", strings.Repeat("w", 50))), "invalid_grant")
	secrets = append(secrets, code2)

	wantStatus(t, b.decide(b.consent(authQuery(app, "https://app.example/cb", "read", "st"), ""), "deny"), http.StatusFound)

	oob := b.decide(b.consent(authQuery(app, oauth.OOBRedirectURI, "read", ""), ""), "approve")
	code3 := secretPattern.FindString(oob.body)
	tok3 := f.exchange(app, code3, oauth.OOBRedirectURI, "")
	secrets = append(secrets, code3, tok3)

	// Bad client credentials, client_credentials, API calls, revocation.
	wantOAuthError(t, f.token(url.Values{"grant_type": {"client_credentials"}, "client_id": {app.ClientID}, "client_secret": {app.ClientSecret + "x"}}), "invalid_client")
	wantOAuthError(t, f.token(url.Values{"grant_type": {"client_credentials"}, "client_id": {app.ClientID}, "client_secret": {app.ClientSecret}},
		"Authorization", "Basic eDp5"), "invalid_client")
	appTok := f.appToken(app, "")
	secrets = append(secrets, appTok)
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok3), http.StatusOK)
	wantStatus(t, f.getWithToken(oauth.AppsVerifyPath, appTok), http.StatusOK)
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, "hat_madeup_but_secret_looking_value"), http.StatusUnauthorized)
	secrets = append(secrets, "hat_madeup_but_secret_looking_value")
	wantStatus(t, f.postForm(oauth.RevokePath, url.Values{"client_id": {app.ClientID}, "client_secret": {app.ClientSecret}, "token": {appTok}}), http.StatusOK)

	// The member revokes the app in settings.
	page := b.get(oauth.AuthorizedAppsPath)
	wantStatus(t, b.submit(page, oauth.AuthorizedAppsPath, nil), http.StatusOK)

	logs := f.logs.String()
	if !strings.Contains(logs, "issued token") || !strings.Contains(logs, "authorization code used twice") {
		t.Fatalf("the flows were not logged at debug level; captured:\n%s", logs)
	}
	for _, s := range append(secrets, password) {
		if s != "" && strings.Contains(logs, s) {
			t.Errorf("the logs contain a secret (%.6s...):\n%s", s, logs)
		}
	}
}

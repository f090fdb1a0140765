package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mattn/go-mastodon"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

// TestClientGoOAuth2WithPKCE: golang.org/x/oauth2 runs the authorization
// code flow with PKCE against the server, the member using the real
// sign-in and consent forms.
func TestClientGoOAuth2WithPKCE(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	const cb = "http://127.0.0.1:9/callback"
	app := f.register("x/oauth2", cb, "read write")
	conf := &oauth2.Config{
		ClientID:     app.ClientID,
		ClientSecret: app.ClientSecret,
		RedirectURL:  cb,
		Scopes:       []string{"read", "write:statuses"},
		Endpoint: oauth2.Endpoint{
			AuthURL:   f.url(oauth.AuthorizePath),
			TokenURL:  f.url(oauth.TokenPath),
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
	verifier := oauth2.GenerateVerifier()
	state := "state-" + verifier[:8]
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))

	b := f.browser()
	consent := b.get(authURL)
	wantStatus(t, consent, http.StatusSeeOther)
	signIn := b.follow(consent)
	back := b.submit(signIn, "/auth/sign_in", url.Values{"username": {"alice"}, "password": {password}})
	consent = b.follow(back)
	wantStatus(t, consent, http.StatusOK)
	r := b.decide(consent, "approve")
	wantStatus(t, r, http.StatusFound)
	loc, _ := r.Location()
	if !strings.HasPrefix(loc.String(), cb+"?") || loc.Query().Get("state") != state {
		t.Fatalf("callback %s", loc)
	}

	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, noRedirects)
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || tok.RefreshToken != "" || !tok.Expiry.IsZero() || tok.Extra("scope") != "read write:statuses" {
		t.Fatalf("token %+v scope %v", tok, tok.Extra("scope"))
	}
	client := conf.Client(ctx, tok)
	res, err := client.Get(f.url(oauth.VerifyCredentialsPath))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("verify_credentials: HTTP %d", res.StatusCode)
	}

	// The same code again: x/oauth2 sees invalid_grant, and the token is gone.
	_, err = conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || re.Response.StatusCode != http.StatusBadRequest {
		t.Fatalf("second exchange: %v", err)
	}
	res, err = client.Get(f.url(oauth.VerifyCredentialsPath))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("verify_credentials after the replay: HTTP %d", res.StatusCode)
	}
}

// TestClientGoOAuth2Errors: x/oauth2 reads the server's errors: a wrong
// verifier, and HTTP Basic client authentication.
func TestClientGoOAuth2Errors(t *testing.T) {
	c := newCodeFixture(t, "read")
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, noRedirects)
	conf := oauth2.Config{ClientID: c.app.ClientID, ClientSecret: c.app.ClientSecret, RedirectURL: c.cb,
		Endpoint: oauth2.Endpoint{AuthURL: c.url(oauth.AuthorizePath), TokenURL: c.url(oauth.TokenPath), AuthStyle: oauth2.AuthStyleInParams}}

	_, err := conf.Exchange(ctx, c.code("read", oauth2.GenerateVerifier()), oauth2.VerifierOption(oauth2.GenerateVerifier()))
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("wrong verifier: %v", err)
	}

	basic := conf
	basic.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	_, err = basic.Exchange(ctx, c.code("read", ""))
	if !errors.As(err, &re) || re.ErrorCode != "invalid_client" || re.Response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("HTTP Basic: %v", err)
	}

	// client_credentials through x/oauth2's own package.
	cc := clientcredentials.Config{ClientID: c.app.ClientID, ClientSecret: c.app.ClientSecret, TokenURL: c.url(oauth.TokenPath), AuthStyle: oauth2.AuthStyleInParams}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Extra("scope") != "read" {
		t.Fatalf("app token scope %v", tok.Extra("scope"))
	}
}

// TestClientGoMastodon: github.com/mattn/go-mastodon registers an app,
// exchanges an OOB code, verifies its credentials, and so does its app
// token; after revocation verify_credentials is 401.
func TestClientGoMastodon(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	ctx := context.Background()
	app, err := mastodon.RegisterApp(ctx, &mastodon.AppConfig{
		Server:     f.ts.URL,
		ClientName: "go-mastodon",
		Scopes:     "read write follow push",
		Website:    "https://github.com/mattn/go-mastodon",
	})
	if err != nil {
		t.Fatal(err)
	}
	if app.RedirectURI != oauth.OOBRedirectURI || app.ClientID == "" || app.ClientSecret == "" || string(app.ID) == "" {
		t.Fatalf("registered %+v", app)
	}

	// The member opens app.AuthURI, signs in, approves and copies the code.
	b := f.browser()
	au, _ := url.Parse(app.AuthURI)
	consent := b.consent(au.Query(), "alice")
	wantBody(t, consent, "go-mastodon")
	shown := b.decide(consent, "approve")
	wantStatus(t, shown, http.StatusOK)
	code := secretPattern.FindString(shown.body)

	client := mastodon.NewClient(&mastodon.Config{Server: f.ts.URL, ClientID: app.ClientID, ClientSecret: app.ClientSecret})
	if err := client.AuthenticateToken(ctx, code, app.RedirectURI); err != nil {
		t.Fatal(err)
	}
	acct, err := client.GetAccountCurrentUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if acct.Username != "alice" || acct.Acct != "alice" || acct.CreatedAt.IsZero() {
		t.Fatalf("account %+v", acct)
	}
	av, err := client.VerifyAppCredentials(ctx)
	if err != nil || av.Name != "go-mastodon" {
		t.Fatalf("app credentials %+v, %v", av, err)
	}
	if _, err := client.GetInstance(ctx); err != nil {
		t.Fatalf("instance: %v", err)
	}

	// App token (client_credentials).
	appClient := mastodon.NewClient(&mastodon.Config{Server: f.ts.URL, ClientID: app.ClientID, ClientSecret: app.ClientSecret})
	if err := appClient.GetAppAccessToken(ctx, app.RedirectURI); err != nil {
		t.Fatal(err)
	}
	if _, err := appClient.VerifyAppCredentials(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := appClient.GetAccountCurrentUser(ctx); err == nil || !strings.Contains(err.Error(), "422") {
		t.Fatalf("app token verify_credentials: %v, want 422", err)
	}

	// Revoke the member token; the client is signed out.
	r := f.postForm(oauth.RevokePath, url.Values{"client_id": {app.ClientID}, "client_secret": {app.ClientSecret}, "token": {client.Config.AccessToken}})
	wantStatus(t, r, http.StatusOK)
	if _, err := client.GetAccountCurrentUser(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("after revoke: %v, want 401", err)
	}

	// A code is single-use for go-mastodon too.
	if err := client.AuthenticateToken(ctx, code, app.RedirectURI); err == nil {
		t.Fatal("a used code was exchanged again")
	}
}

// TestClientGoOAuth2AutoDetectAuthStyle: x/oauth2's default tries HTTP
// Basic first, gets invalid_client, and retries with the credentials in
// the body; the refused first attempt must not burn the code.
func TestClientGoOAuth2AutoDetectAuthStyle(t *testing.T) {
	c := newCodeFixture(t, "read")
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, noRedirects)
	conf := oauth2.Config{ClientID: c.app.ClientID, ClientSecret: c.app.ClientSecret, RedirectURL: c.cb,
		Endpoint: oauth2.Endpoint{AuthURL: c.url(oauth.AuthorizePath), TokenURL: c.url(oauth.TokenPath)}}
	verifier := oauth2.GenerateVerifier()
	tok, err := conf.Exchange(ctx, c.code("read", verifier), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, tok.AccessToken), http.StatusOK)
}

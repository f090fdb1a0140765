package grants_test

// The removal of unused apps (vacuum.go) as a client sees it, over the
// OAuth server's HTTP endpoints.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
	"github.com/hearthkit/caddy-hearth/storage/members"
	"github.com/hearthkit/caddy-hearth/storage/storagetest"
)

// TestUnusedAppsAreRemovedAfterADay: a day after registration, an app
// never used is gone, and its client_id is refused at /oauth/token with
// Doorkeeper's invalid_client, as Mastodon's ApplicationsVacuum deletes
// it; an app that got an app token, one that got an authorization code,
// one registered less than a day ago and an operator client all stay.
// Mastodon's ApplicationsVacuum: app/lib/vacuum/applications_vacuum.rb in
// mastodon/mastodon, commit 0ca70415d85273e68efc0535d6c407b6891982fe.
func TestUnusedAppsAreRemovedAfterADay(t *testing.T) {
	st := storagetest.OpenFast(t, t.TempDir())
	kvtest.Eventually(t, "the store listens for other nodes' writes", st.Live)
	srv := oauth.New(st, oauth.Options{Pages: account.New(st, account.Options{}), RegistrationLimit: 1 << 20})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	post := func(path string, form url.Values) (int, map[string]any) {
		t.Helper()
		resp, err := http.PostForm(ts.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("POST %s: %d, body not JSON: %v", path, resp.StatusCode, err)
		}
		return resp.StatusCode, body
	}
	const redirect = "https://app.example/cb"
	type client struct{ id, secret string }
	register := func(name string) client {
		t.Helper()
		status, body := post(oauth.AppsPath, url.Values{"client_name": {name}, "redirect_uris": {redirect}, "scopes": {"read"}})
		if status != http.StatusOK {
			t.Fatalf("register %s: %d %v", name, status, body)
		}
		return client{body["client_id"].(string), body["client_secret"].(string)}
	}
	appToken := func(c client) (int, map[string]any) {
		t.Helper()
		return post(oauth.TokenPath, url.Values{"grant_type": {"client_credentials"}, "client_id": {c.id}, "client_secret": {c.secret}, "scope": {"read"}})
	}
	works := func(what string, c client) {
		t.Helper()
		if status, body := appToken(c); status != http.StatusOK {
			t.Errorf("%s: client_credentials answers %d %v, want 200", what, status, body)
		}
	}

	unused := register("Unused")
	byToken := register("Used by its app token")
	status, body := appToken(byToken)
	if status != http.StatusOK {
		t.Fatalf("client_credentials: %d %v", status, body)
	}
	// An app that revoked its only token was used all the same.
	status, body = post(oauth.RevokePath, url.Values{"client_id": {byToken.id}, "client_secret": {byToken.secret}, "token": {body["access_token"].(string)}})
	if status != http.StatusOK {
		t.Fatalf("revoke: %d %v", status, body)
	}
	byCode := register("Used by a member")
	m, err := members.Of(st).CreateMember(t.Context(), "alice", "Alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	code, err := grants.Of(st).CreateCode(t.Context(), byCode.id, m, redirect, []string{"read"}, "")
	if err != nil {
		t.Fatal(err)
	}
	status, body = post(oauth.TokenPath, url.Values{"grant_type": {"authorization_code"}, "client_id": {byCode.id},
		"client_secret": {byCode.secret}, "redirect_uri": {redirect}, "code": {code}})
	if status != http.StatusOK {
		t.Fatalf("code exchange: %d %v", status, body)
	}
	_, opSecret, err := grants.Of(st).CreateClient(t.Context(), "Wiki", []string{redirect}, []string{"openid"}, grants.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	clients, err := grants.Of(st).Clients(t.Context())
	if err != nil || len(clients) != 1 {
		t.Fatalf("operator clients: %v, %v", clients, err)
	}
	operator := client{clients[0].ClientID, opSecret}

	// A pass before the day is over removes nothing.
	if err := grants.VacuumApps(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	works("an unused app before its first day", unused)
	// That was a use: register another that is never used.
	unused = register("Unused")

	defer grants.SetNow(func() time.Time { return time.Now().Add(grants.UnusedAppAge + time.Minute) })()
	young := register("Registered a minute ago")
	if err := grants.VacuumApps(t.Context(), st); err != nil {
		t.Fatal(err)
	}

	status, body = appToken(unused)
	if status != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Errorf("an app unused for a day: client_credentials answers %d %v, want 401 invalid_client", status, body)
	}
	status, body = post(oauth.TokenPath, url.Values{"grant_type": {"authorization_code"}, "client_id": {unused.id},
		"client_secret": {unused.secret}, "redirect_uri": {redirect}, "code": {"hac_unknown"}})
	if status != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Errorf("an app unused for a day: a code exchange answers %d %v, want 401 invalid_client", status, body)
	}
	works("an app used by its app token", byToken)
	works("an app used by a member", byCode)
	works("an app registered a minute ago", young)
	// The operator client still authenticates: the unknown code is what
	// is refused, not the client.
	status, body = post(oauth.TokenPath, url.Values{"grant_type": {"authorization_code"}, "client_id": {operator.id},
		"client_secret": {operator.secret}, "redirect_uri": {redirect}, "code": {"hac_unknown"}})
	if body["error"] != "invalid_grant" {
		t.Errorf("an operator client a day on: a code exchange answers %d %v, want invalid_grant", status, body)
	}
}

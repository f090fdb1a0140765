package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// accessSite serves the OAuth server and the GraphQL API.
var accessSite = fmt.Sprintf("%s {\n\thearth_oauth\n\thearth_graphql\n\trespond \"site\"\n}\n", testSite)

// TestCLIListsAndRevokesTokensAndGrants: `caddy hearth member tokens` and
// `member grants` list a member's API tokens and authorized applications
// (never a secret) and revoke one: the revoked token or app's token is
// refused at once, the others keep working.
func TestCLIListsAndRevokesTokensAndGrants(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), accessSite))
	addr := "--address=" + testAdmin
	const password = "correct horse"
	if _, err := runHearth(t, password+"\n", "member", "add", "alice", "--password-stdin", addr); err != nil {
		t.Fatal(err)
	}
	keep, err := runHearth(t, "", "token", "create", "alice", "--name", "Obsidian", addr)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := runHearth(t, "", "token", "create", "alice", "--name", "Old script", "--expires", "never", addr)
	if err != nil {
		t.Fatal(err)
	}
	keep, gone = strings.TrimSpace(keep), strings.TrimSpace(gone)
	me := func(token string) string {
		return gql(t, testSite, token, `{ me { id } }`, nil).code()
	}
	if me(keep) != "" || me(gone) != "" {
		t.Fatal("new tokens do not work")
	}

	out, err := runHearth(t, "", "member", "tokens", "alice", "--json", addr)
	var toks []apiTokenListView
	if err != nil || json.Unmarshal([]byte(out), &toks) != nil || len(toks) != 2 {
		t.Fatalf("member tokens --json: %q, %v", out, err)
	}
	if strings.Contains(out, keep) || strings.Contains(out, gone) || strings.Contains(out, "digest") {
		t.Fatalf("the listing shows a secret: %s", out)
	}
	var goneID string
	for _, tok := range toks {
		if tok.Name == "Old script" {
			goneID = tok.ID
		}
		if tok.Origin != "operator" || tok.Expired {
			t.Fatalf("token %+v", tok)
		}
	}
	table, err := runHearth(t, "", "member", "tokens", "alice", addr)
	if err != nil || !strings.Contains(table, "Obsidian") || !strings.Contains(table, "Old script") || !strings.Contains(table, goneID) {
		t.Fatalf("member tokens: %q, %v", table, err)
	}
	if out, err := runHearth(t, "", "member", "tokens", "alice", "--revoke", goneID, addr); err != nil || !strings.Contains(out, "revoked API token "+goneID) {
		t.Fatalf("member tokens --revoke: %q, %v", out, err)
	}
	if me(gone) != "UNAUTHORIZED" || me(keep) != "" {
		t.Fatalf("after revoking: revoked token %q, kept token %q", me(gone), me(keep))
	}
	if _, err := runHearth(t, "", "member", "tokens", "alice", "--revoke", goneID, addr); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("revoking it again: %v", err)
	}
	if _, err := runHearth(t, "", "member", "tokens", "nobody", addr); err == nil || !strings.Contains(err.Error(), `no member "nobody"`) {
		t.Fatalf("tokens of a missing member: %v", err)
	}

	// An application alice authorizes through the consent page.
	const cb = "https://app.example/cb"
	clientID, clientSecret := registerApp(t, url.Values{"client_name": {"Tooter"}, "redirect_uris": {cb}, "scopes": {"read write"}})
	authURL := testSite + "/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {cb}, "scope": {"read"}}.Encode()
	p := approve(t, newBrowser(t, testSite), authURL, "alice", password)
	loc, _ := url.Parse(p.Header.Get("Location"))
	resp, err := http.PostForm(testSite+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"client_id": {clientID}, "client_secret": {clientSecret}, "redirect_uri": {cb}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("token exchange: HTTP %d, %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	verify := func() int {
		req, _ := http.NewRequest(http.MethodGet, testSite+"/api/v1/accounts/verify_credentials", nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, _ := send(t, req)
		return resp.StatusCode
	}
	if verify() != http.StatusOK {
		t.Fatal("the app's token does not work")
	}
	out, err = runHearth(t, "", "member", "grants", "alice", "--json", addr)
	var grants []grantView
	if err != nil || json.Unmarshal([]byte(out), &grants) != nil || len(grants) != 1 ||
		grants[0].Name != "Tooter" || strings.Join(grants[0].Scopes, " ") != "read" || grants[0].ClientID != clientID {
		t.Fatalf("member grants --json: %q, %v", out, err)
	}
	if strings.Contains(out, clientSecret) || strings.Contains(out, tok.AccessToken) {
		t.Fatalf("the listing shows a secret: %s", out)
	}
	if table, err := runHearth(t, "", "member", "grants", "alice", addr); err != nil || !strings.Contains(table, grants[0].AppID) || !strings.Contains(table, "Tooter") {
		t.Fatalf("member grants: %q, %v", table, err)
	}
	if _, err := runHearth(t, "", "member", "grants", "alice", "--revoke", "123", addr); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("revoking an app alice never authorized: %v", err)
	}
	if verify() != http.StatusOK {
		t.Fatal("a refused revocation revoked the token")
	}
	if out, err := runHearth(t, "", "member", "grants", "alice", "--revoke", grants[0].AppID, addr); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("member grants --revoke: %q, %v", out, err)
	}
	if verify() != http.StatusUnauthorized {
		t.Fatal("the app's token works after its grant was revoked")
	}
	if out, err := runHearth(t, "", "member", "grants", "alice", "--json", addr); err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("grants after revoking: %q, %v", out, err)
	}
	if me(keep) != "" {
		t.Fatal("revoking the app revoked an API token")
	}
}

// TestCLIAddChecksBeforeAskingPassword: `member add` refuses an invalid or
// taken username before it asks for a password (here: before it
// complains that standard input is no terminal).
func TestCLIAddChecksBeforeAskingPassword(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	addr := "--address=" + testAdmin
	if _, err := runHearth(t, "", "member", "add", "bad name!", addr); err == nil || !strings.Contains(err.Error(), "letters, digits or underscores") {
		t.Fatalf("invalid username: %v", err)
	}
	// Checked without the admin API too.
	if _, err := runHearth(t, "", "member", "add", "bad-name", "--address=127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "letters, digits or underscores") {
		t.Fatalf("invalid username, no admin API: %v", err)
	}
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)
	if _, err := runHearth(t, "", "member", "add", "Alice", addr); err == nil || !strings.Contains(err.Error(), `"alice" is taken`) {
		t.Fatalf("taken username: %v", err)
	}
	// A free name gets to the password.
	if _, err := runHearth(t, "", "member", "add", "bob", addr); err == nil || !strings.Contains(err.Error(), "--password-stdin") {
		t.Fatalf("free username: %v", err)
	}
}

// TestCLIAddressWithoutPort: --address with a host and no port uses the
// port of Caddy's default admin address (2019); other forms are kept.
func TestCLIAddressWithoutPort(t *testing.T) {
	for in, want := range map[string]string{
		"localhost":            "localhost:2019",
		"127.0.0.1":            "127.0.0.1:2019",
		"[::1]":                "[::1]:2019",
		"localhost:2999":       "localhost:2999",
		"unix//run/caddy.sock": "unix//run/caddy.sock",
	} {
		if got, err := withAdminPort(in); err != nil || got != want {
			t.Errorf("withAdminPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// Through the CLI, against the test's Caddy: its admin port stands for
	// the default (Caddy takes it from CADDY_ADMIN at start).
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	saved := caddy.DefaultAdminListen
	caddy.DefaultAdminListen = testAdmin
	defer func() { caddy.DefaultAdminListen = saved }()
	if out, err := runHearth(t, "", "member", "list", "--address", "localhost"); err != nil || !strings.Contains(out, "USERNAME") {
		t.Fatalf("member list --address localhost: %q, %v", out, err)
	}
}

// TestRemoveConfirmationOnATerminal: on a terminal, `member remove` goes
// on only when the username is typed.
func TestRemoveConfirmationOnATerminal(t *testing.T) {
	var shown strings.Builder
	if err := confirmTyped(strings.NewReader("alice\n"), &shown, "alice"); err != nil || !strings.Contains(shown.String(), "Type the username") {
		t.Fatalf("typed: %v, %q", err, shown.String())
	}
	for _, typed := range []string{"y\n", "ALICE\n", "", "alic"} {
		if err := confirmTyped(strings.NewReader(typed), &strings.Builder{}, "alice"); err == nil || !strings.Contains(err.Error(), "not removed") {
			t.Errorf("typed %q: %v", typed, err)
		}
	}
}

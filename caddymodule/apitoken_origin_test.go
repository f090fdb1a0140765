package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/oauth2"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// writeOldAPIToken writes an API token into the store in dir (Caddy
// stopped) as earlier versions did, byte for byte: the global ref
// and the member's record, neither with an origin. It returns the token.
func writeOldAPIToken(t *testing.T, dir, memberID, name string, createdAt time.Time) string {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	secret := storage.NewSecret(apitokens.Prefix, 52)
	// An id of the time in the form of that version (milliseconds << 16).
	d, id := storage.Digest(secret), fmt.Sprint(createdAt.UnixMilli()<<16)
	err = db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte("gql/tok/"+d), fmt.Appendf(nil, `{"member_id":%q,"token_id":%q}`, memberID, id)); err != nil {
			return err
		}
		return txn.Set([]byte("u/"+memberID+"/gql/tok/"+id), fmt.Appendf(nil,
			`{"id":%q,"member_id":%q,"name":%q,"digest":%q,"created_at":%q}`,
			id, memberID, name, d, createdAt.UTC().Format(time.RFC3339Nano)))
	})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// Through Caddy: an OAuth app approved with read and
// write cannot make an API token; a token made the old way (when it could)
// stops working once the upgraded server opens the store, and a kept one
// (older than every OAuth app) stops when the member is suspended.
func TestAPITokensCannotOutliveTheirGrantThroughCaddy(t *testing.T) {
	dir := t.TempDir()
	caddyfile := hearthCaddyfile(dir, fmt.Sprintf("%s {\n\thearth_oauth\n\thearth_graphql\n}\n", testSite))
	startHearth(t, caddyfile)
	const password = "correct horse battery"
	adminJSONOK(t, http.MethodPost, "/hearth/members",
		fmt.Sprintf(`{"username":"alice","password":%q}`, password), http.StatusCreated, nil)
	alice, err := members.Of(hearthStore(t)).Member(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}

	const callback = "http://127.0.0.1:7/callback"
	id, secret := registerApp(t, url.Values{"client_name": {"sync app"}, "redirect_uris": {callback}, "scopes": {"read write"}})
	conf := &oauth2.Config{
		ClientID: id, ClientSecret: secret, RedirectURL: callback, Scopes: []string{"read", "write"},
		Endpoint: oauth2.Endpoint{AuthURL: testSite + "/oauth/authorize", TokenURL: testSite + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams},
	}
	p := approve(t, newBrowser(t, testSite), conf.AuthCodeURL("s"), "alice", password)
	loc, _ := url.Parse(p.Header.Get("Location"))
	tok, err := conf.Exchange(context.Background(), loc.Query().Get("code"))
	if err != nil || tok.Extra("scope") != "read write" {
		t.Fatalf("exchange: %v, scope %v", err, tok.Extra("scope"))
	}

	// The app asks for an API token with its read+write OAuth token.
	const create = `mutation { createApiToken(data: {name: "forever", expiry: NEVER}) { secret } }`
	r := gql(t, testSite, tok.AccessToken, create, nil)
	if r.status != http.StatusOK || r.code() != "FORBIDDEN" || r.Errors[0].Message != "API tokens are not allowed for this operation" ||
		strings.Contains(string(r.Data), apitokens.Prefix) {
		t.Fatalf("createApiToken with an OAuth token: HTTP %d %+v %s", r.status, r.Errors, r.Data)
	}
	if toks, err := apitokens.Of(hearthStore(t)).List(t.Context(), alice.ID); err != nil || len(toks) != 0 {
		t.Fatalf("%d API tokens after the refusal (%v)", len(toks), err)
	}

	// What earlier versions let the app do: tokens written the old way
	// while Caddy is stopped, then the upgraded Caddy opens the store.
	loadCaddyfile(t, fmt.Sprintf("{\n\tadmin %s\n}\n", testAdmin))
	minted := writeOldAPIToken(t, dir, alice.ID, "forever", time.Now())
	older := writeOldAPIToken(t, dir, alice.ID, "laptop script", time.Now().Add(-time.Hour))
	loadCaddyfile(t, caddyfile)

	const me = `query { me { username } }`
	if r := gql(t, testSite, minted, me, nil); r.code() != "UNAUTHORIZED" || strings.Contains(string(r.Data), "alice") {
		t.Fatalf("the token the app could have made: HTTP %d %+v %s", r.status, r.Errors, r.Data)
	}
	if r := gql(t, testSite, older, me, nil); len(r.Errors) > 0 || !strings.Contains(string(r.Data), `"alice"`) {
		t.Fatalf("the token older than every OAuth app: HTTP %d %+v %s", r.status, r.Errors, r.Data)
	}
	// The member revokes the app: the minted token stays dead, the OAuth
	// token dies.
	resp, err := http.PostForm(testSite+"/oauth/revoke", url.Values{"client_id": {id}, "client_secret": {secret}, "token": {tok.AccessToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, s := range []string{minted, tok.AccessToken} {
		if r := gql(t, testSite, s, me, nil); r.code() != "UNAUTHORIZED" {
			t.Fatalf("after revoking: HTTP %d %+v %s", r.status, r.Errors, r.Data)
		}
	}
	// Suspending the member stops the kept one.
	adminJSONOK(t, http.MethodPost, "/hearth/members/alice/suspend", "", http.StatusOK, nil)
	if r := gql(t, testSite, older, me, nil); len(r.Errors) == 0 || strings.Contains(string(r.Data), "alice") {
		t.Fatalf("a suspended member's kept token: HTTP %d %+v %s", r.status, r.Errors, r.Data)
	}
}

package graphql_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestSignInFromPlainHTTPOffLocalhostSaysWhy: Inboxt's web app open at
// http://mybox:8080 (plain HTTP under a name other than localhost) would
// get the Secure session cookie, which the browser drops, and show the
// sign-in form again with no word. signIn and createAccount answer
// BAD_REQUEST saying to open the site over HTTPS instead, start no
// session, make no member, and log why, as the site's sign-in page does.
// Behind a proxy that ends TLS the request is plain HTTP but the app's
// page is https://mybox:8080: that sign-in goes through.
func TestSignInFromPlainHTTPOffLocalhostSaysWhy(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	e := newEnv(t, options{}, account.Options{OpenRegistration: true, Logger: zap.New(core)})
	const (
		signIn = `mutation signIn($data: SignInInput!) { signIn(data: $data) { success } }`
		create = `mutation createAccount($data: CreateAccountInput!) { createAccount(data: $data) { success } }`
	)
	// post sends query as the web app's page at origin does: a same-origin
	// fetch, with no session yet.
	post := func(origin, query string, data map[string]any) (*response, *http.Cookie) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"data": data}})
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/graphql", bytes.NewReader(body))
		req.Host = "mybox:8080"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, b := send(t, req)
		r := &response{Status: resp.StatusCode, Header: resp.Header}
		if err := json.Unmarshal(b, r); err != nil {
			t.Fatalf("response is not JSON (status %d): %s", resp.StatusCode, b)
		}
		for _, c := range resp.Cookies() {
			if c.Name == account.CookieName {
				return r, c
			}
		}
		return r, nil
	}
	signInData := map[string]any{"emailAddress": "alice", "password": "correct horse battery"}
	createData := map[string]any{"username": "bob", "emailAddress": "bob", "password": "a long enough password"}
	for _, tc := range []struct {
		query string
		data  map[string]any
	}{{signIn, signInData}, {create, createData}} {
		r, cookie := post("http://mybox:8080", tc.query, tc.data)
		if r.Status != http.StatusOK || len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_REQUEST" ||
			!strings.Contains(r.Errors[0].Message, "Open the site at its https:// address") {
			t.Fatalf("%.20s from http://mybox:8080: status %d, data %s, errors %+v; want BAD_REQUEST saying to open the site over HTTPS",
				tc.query, r.Status, r.Data, r.Errors)
		}
		if cookie != nil {
			t.Errorf("%.20s from http://mybox:8080 set a session cookie", tc.query)
		}
	}
	if _, err := members.Of(e.store).Member(t.Context(), "bob"); err == nil {
		t.Error("the refused createAccount made the member bob")
	}
	refused := logs.FilterMessageSnippet("sign-in refused: the browser is on a plain-HTTP page").
		FilterField(zap.String("origin", "http://mybox:8080"))
	if n := refused.Len(); n != 2 {
		t.Errorf("%d log lines say why the sign-ins were refused, want 2 (signIn, createAccount)", n)
	}

	r, cookie := post("https://mybox:8080", signIn, signInData)
	if len(r.Errors) > 0 || string(r.Data) != `{"signIn":{"success":true}}` {
		t.Fatalf("signIn from https://mybox:8080 (a proxy ending TLS): %s %+v", r.Data, r.Errors)
	}
	if cookie == nil || !cookie.Secure {
		t.Fatalf("signIn from https://mybox:8080: cookie %v, want a Secure session cookie", cookie)
	}
}

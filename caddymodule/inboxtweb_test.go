package caddymodule

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHearthBesideACatchAllHandle: Inboxt's web app's recipe, a
// single-page app served by a catch-all handle block (try_files to
// index.html) on the same site as hearth_graphql, with no route block:
// Hearth's directives sort before handle, so the API, GET /api/config
// and Hearth's own pages answer while every other path is the app's.
// Signing in through the API as the app does takes the address Hearth
// reports on localhost (a dotless host).
func TestHearthBesideACatchAllHandle(t *testing.T) {
	app := t.TempDir()
	if err := os.WriteFile(filepath.Join(app, "index.html"), []byte("<!doctype html><title>the app</title>"), 0o644); err != nil {
		t.Fatal(err)
	}
	startHearth(t, hearthCaddyfile(t.TempDir(), `http://localhost:9080 {
	hearth_oauth
	hearth_graphql
	handle {
		root * `+app+`
		try_files {path} /index.html
		file_server
	}
}
`))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, testSite+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", testSite)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	gqlBody := func(query string, vars map[string]any) string {
		b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		return string(bytes.TrimSpace(b))
	}

	for _, path := range []string{"/", "/r/some-item"} {
		if status, body := do(http.MethodGet, path, ""); status != http.StatusOK || !strings.Contains(body, "the app") {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
	}
	if status, body := do(http.MethodGet, "/api/config", ""); status != http.StatusOK || !strings.Contains(body, `"appUrl":"`+testSite+`"`) {
		t.Fatalf("GET /api/config: %d %s", status, body)
	}
	if status, body := do(http.MethodGet, "/auth/sign_in", ""); status != http.StatusOK || strings.Contains(body, "the app") {
		t.Fatalf("GET /auth/sign_in: %d %s", status, body)
	}
	signIn := gqlBody(`mutation signIn($data: SignInInput!) { signIn(data: $data) { success } }`,
		map[string]any{"data": map[string]any{"emailAddress": "alice@localhost.invalid", "password": "correct horse"}})
	if status, body := do(http.MethodPost, "/api/graphql", signIn); status != http.StatusOK || body != `{"data":{"signIn":{"success":true}}}` {
		t.Fatalf("signIn: %d %s", status, body)
	}
	if status, body := do(http.MethodPost, "/api/graphql", gqlBody(`{ me { emailAddress isEmailVerified } }`, nil)); status != http.StatusOK ||
		body != `{"data":{"me":{"emailAddress":"alice@localhost.invalid","isEmailVerified":true}}}` {
		t.Fatalf("me: %d %s", status, body)
	}
}

package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/hearthkit/caddy-hearth/storage/members"
)

const adminTestSite = testSite + " {\n\trespond \"ok\"\n}\n"

// runningStore is the store of the in-process Caddy's hearth app, to check
// what the admin API wrote (the API itself never shows password hashes).
func runningStoreAuthenticates(t *testing.T, username, password string) bool {
	t.Helper()
	v, err := caddy.ActiveContext().AppIfConfigured("hearth")
	if err != nil {
		t.Fatal(err)
	}
	_, err = members.Of(v.(*App).Store()).Authenticate(t.Context(), username, password)
	return err == nil
}

func TestAdminMemberLifecycle(t *testing.T) {
	dir := t.TempDir()
	startHearth(t, hearthCaddyfile(dir, adminTestSite))

	status, body := adminDo(t, http.MethodPost, "/hearth/members",
		`{"username":"Alice","password":"correct horse","display_name":"Alice Liddell"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: HTTP %d: %s", status, body)
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "username", "display_name", "created_at", "suspended"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("member JSON lacks %q: %s", k, body)
		}
	}
	if len(raw) != 5 || strings.Contains(string(body), "argon2") || strings.Contains(string(body), "hash") {
		t.Fatalf("member JSON shows more than the member: %s", body)
	}
	var alice memberView
	json.Unmarshal(body, &alice)
	if alice.Username != "Alice" || alice.DisplayName != "Alice Liddell" || alice.Suspended || alice.ID == "" ||
		time.Since(alice.CreatedAt) > time.Hour {
		t.Fatalf("created member: %+v", alice)
	}

	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"bob","password":"battery staple"}`, http.StatusCreated, nil)
	status, body = adminDo(t, http.MethodPost, "/hearth/members", `{"username":"ALICE","password":"correct horse"}`)
	if status != http.StatusConflict || !strings.Contains(string(body), "taken") {
		t.Fatalf("duplicate username: HTTP %d: %s", status, body)
	}

	var list []memberView
	adminJSONOK(t, http.MethodGet, "/hearth/members", "", http.StatusOK, &list)
	if len(list) != 2 || list[0].Username != "Alice" || list[1].Username != "bob" {
		t.Fatalf("list: %+v", list)
	}

	var got memberView
	adminJSONOK(t, http.MethodGet, "/hearth/members/alice", "", http.StatusOK, &got)
	if !reflect.DeepEqual(got, alice) {
		t.Fatalf("get (any case) = %+v, want %+v", got, alice)
	}

	adminJSONOK(t, http.MethodPost, "/hearth/members/alice/suspend", "", http.StatusOK, &got)
	if !got.Suspended {
		t.Fatalf("after suspend: %+v", got)
	}
	adminJSONOK(t, http.MethodGet, "/hearth/members/Alice", "", http.StatusOK, &got)
	if !got.Suspended {
		t.Fatalf("suspension not stored: %+v", got)
	}
	if runningStoreAuthenticates(t, "alice", "correct horse") {
		t.Fatal("a suspended member signs in")
	}
	adminJSONOK(t, http.MethodPost, "/hearth/members/alice/unsuspend", "", http.StatusOK, &got)
	if got.Suspended {
		t.Fatalf("after unsuspend: %+v", got)
	}
	if !runningStoreAuthenticates(t, "alice", "correct horse") {
		t.Fatal("unsuspended member cannot sign in")
	}

	adminJSONOK(t, http.MethodPut, "/hearth/members/alice/password", `{"password":"a new passphrase"}`, http.StatusNoContent, nil)
	if runningStoreAuthenticates(t, "alice", "correct horse") || !runningStoreAuthenticates(t, "alice", "a new passphrase") {
		t.Fatal("password not changed")
	}

	adminJSONOK(t, http.MethodDelete, "/hearth/members/alice", "", http.StatusNoContent, nil)
	status, body = adminDo(t, http.MethodGet, "/hearth/members/alice", "")
	if status != http.StatusNotFound || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("deleted member: HTTP %d: %s", status, body)
	}
	adminJSONOK(t, http.MethodGet, "/hearth/members", "", http.StatusOK, &list)
	if len(list) != 1 || list[0].Username != "bob" {
		t.Fatalf("list after delete: %+v", list)
	}
}

func TestAdminBadInputIsRefusedAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	startHearth(t, hearthCaddyfile(dir, adminTestSite))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse","display_name":"Alice"}`, http.StatusCreated, nil)
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"carol","password":"correct horse"}`, http.StatusCreated, nil)
	adminJSONOK(t, http.MethodPost, "/hearth/members/carol/suspend", "", http.StatusOK, nil)
	var before []memberView
	adminJSONOK(t, http.MethodGet, "/hearth/members", "", http.StatusOK, &before)

	huge := `{"username":"bob","password":"correct horse","display_name":"` + strings.Repeat("x", 70<<10) + `"}`
	cases := []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"POST", "/hearth/members", "", 400, "JSON object"},
		{"POST", "/hearth/members", "not json", 400, "invalid JSON"},
		{"POST", "/hearth/members", "[]", 400, "invalid JSON"},
		{"POST", "/hearth/members", `{"username":"bob","password":"correct horse"`, 400, "invalid JSON"},
		{"POST", "/hearth/members", `{"username":"bob","password":"correct horse","admin":true}`, 400, `unknown field "admin"`},
		{"POST", "/hearth/members", `{"username":"bob","password":"correct horse"} {}`, 400, "more than one"},
		{"POST", "/hearth/members", `{"username":"bob","password":"correct horse"} x`, 400, "invalid JSON"},
		{"POST", "/hearth/members", huge, 413, "larger than 65536 bytes"},
		{"POST", "/hearth/members/alice/api_tokens", `{"name":"` + strings.Repeat("n", 70<<10) + `","expires":"never"}`, 413, "larger than"},
		{"POST", "/hearth/members/carol/api_tokens", `{"name":"laptop","expires":"never"}`, 403, "suspended"},
		{"POST", "/hearth/members", `{"password":"correct horse"}`, 400, "username is required"},
		{"POST", "/hearth/members", `{"username":"bob"}`, 400, "password is required"},
		{"POST", "/hearth/members", `{"username":"bob!","password":"correct horse"}`, 400, "letters, digits or underscores"},
		{"POST", "/hearth/members", `{"username":"` + strings.Repeat("b", 31) + `","password":"correct horse"}`, 400, "1 to 30"},
		{"POST", "/hearth/members", `{"username":"bob","password":"short"}`, 400, "8 to 128"},
		{"POST", "/hearth/members", `{"username":"bob","password":"correct horse","display_name":"` + strings.Repeat("d", 31) + `"}`, 400, "display name"},
		{"POST", "/hearth/members", `{"username":"bob","password":123}`, 400, "invalid JSON"},
		{"POST", "/hearth/members", `{"username":"ALICE","password":"other password"}`, 409, "taken"},
		{"PUT", "/hearth/members/alice/password", "", 400, "JSON object"},
		{"PUT", "/hearth/members/alice/password", `{}`, 400, "password is required"},
		{"PUT", "/hearth/members/alice/password", `{"password":"short"}`, 400, "8 to 128"},
		{"PUT", "/hearth/members/alice/password", `{"password":"long enough pw","username":"x"}`, 400, "unknown field"},
		{"PUT", "/hearth/members/alice/password", `{"password":"` + strings.Repeat("p", 70<<10) + `"}`, 413, "larger than"},
		{"PUT", "/hearth/members/nobody/password", `{"password":"long enough pw"}`, 404, "no member"},
		{"GET", "/hearth/members/nobody", "", 404, `no member "nobody"`},
		{"GET", "/hearth/members/no%20body", "", 404, "no member"},
		{"POST", "/hearth/members/nobody/suspend", "", 404, "no member"},
		{"POST", "/hearth/members/nobody/unsuspend", "", 404, "no member"},
		{"DELETE", "/hearth/members/nobody", "", 404, "no member"},
		{"PUT", "/hearth/members", "{}", 405, "not allowed"},
		{"DELETE", "/hearth/members", "", 405, "not allowed"},
		{"POST", "/hearth/members/alice", "{}", 405, "not allowed"},
		{"GET", "/hearth/members/alice/suspend", "", 405, "not allowed"},
		{"DELETE", "/hearth/members/alice/unsuspend", "", 405, "not allowed"},
		{"POST", "/hearth/members/alice/password", `{"password":"long enough pw"}`, 405, "not allowed"},
		{"POST", "/hearth/backup", "", 405, "not allowed"},
		{"POST", "/hearth/status", "", 405, "not allowed"},
		{"GET", "/hearth/nothing-here", "", 404, "no hearth admin route"},
		{"GET", "/hearth/members/alice/other", "", 404, "no hearth admin route"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %s %.30s", c.method, c.path, c.body), func(t *testing.T) {
			status, body := adminDo(t, c.method, c.path, c.body)
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("answer is not JSON: %s", body)
			}
			if status != c.status || !strings.Contains(e.Error, c.msg) {
				t.Fatalf("HTTP %d %q, want %d with %q", status, e.Error, c.status, c.msg)
			}
		})
	}

	var after []memberView
	adminJSONOK(t, http.MethodGet, "/hearth/members", "", http.StatusOK, &after)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("bad input changed the members: %+v, was %+v", after, before)
	}
	if !runningStoreAuthenticates(t, "alice", "correct horse") {
		t.Fatal("bad input changed alice's password")
	}
}

func TestAdminAnswers503WithoutHearthApp(t *testing.T) {
	startHearth(t, fmt.Sprintf("{\n\tadmin %s\n\thttp_port 9080\n}\n%s", testAdmin, adminTestSite))
	for _, p := range []string{"/hearth/members", "/hearth/status", "/hearth/backup"} {
		status, body := adminDo(t, http.MethodGet, p, "")
		if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "hearth app is not running") {
			t.Fatalf("GET %s without hearth: HTTP %d: %s", p, status, body)
		}
	}
}

package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIResetLinkThroughCaddy: `caddy hearth member reset-link` prints a
// link on the site (its address from --config or --site) with which the
// member sets a new password once; the token reaches neither the access
// log nor Caddy's own log.
func TestCLIResetLinkThroughCaddy(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(t.TempDir(), "access.log")
	caddyfile := hearthCaddyfile(dir, fmt.Sprintf(`%s {
	log {
		output file %q
		format json
	}
	hearth_oauth
	respond "the rest of the site"
}
`, testSite, logFile))
	cfgPath := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	startHearth(t, caddyfile)
	addr := "--address=" + testAdmin
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)
	signedIn := newBrowser(t, testSite)
	signedIn.signIn("alice", "correct horse")

	if _, err := runHearth(t, "", "member", "reset-link", "bob", addr, "--site", testSite); err == nil || !strings.Contains(err.Error(), `no member "bob"`) {
		t.Fatalf("unknown member: %v", err)
	}
	if _, err := runHearth(t, "", "member", "reset-link", "alice", addr, "--site", testSite, "--expires", "8d"); err == nil || !strings.Contains(err.Error(), "at most 7d") {
		t.Fatalf("8 days: %v", err)
	}
	if _, err := runHearth(t, "", "member", "reset-link", "alice", addr, "--site", "example.org"); err == nil || !strings.Contains(err.Error(), "--site must be") {
		t.Fatalf("bad --site: %v", err)
	}
	out, err := runHearth(t, "", "member", "reset-link", "alice", addr, "--config", cfgPath, "--expires", "2d")
	if err != nil {
		t.Fatal(err)
	}
	link := strings.SplitN(out, "\n", 2)[0]
	if !strings.HasPrefix(link, testSite+"/auth/reset/hrt_") || !strings.Contains(out, "works once") {
		t.Fatalf("reset-link printed %q", out)
	}
	token := strings.TrimPrefix(link, testSite+"/auth/reset/")
	// Caddyfile.example's site is plain http on port 8080, not its http_port
	// (80): the link must say http://, which a browser can open there.
	if out, err := runHearth(t, "", "member", "reset-link", "alice", addr, "--config", "../Caddyfile.example"); err != nil ||
		!strings.HasPrefix(out, "http://localhost:8080/auth/reset/hrt_") {
		t.Fatalf("reset-link --config Caddyfile.example printed %q, %v", out, err)
	}
	if out, err := runHearth(t, "", "member", "reset-link", "alice", addr, "--site", testSite+"/", "--disable-2fa"); err != nil ||
		!strings.HasPrefix(out, testSite+"/auth/reset/hrt_") || !strings.Contains(out, "using it turns two-factor sign-in off") {
		t.Fatalf("--disable-2fa: %q %v", out, err)
	}

	b := newBrowser(t, testSite)
	p := b.get(link)
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, "@alice") {
		t.Fatalf("reset page: HTTP %d\n%s", p.StatusCode, p.body)
	}
	p = b.submit(p, "/auth/reset/"+token, url.Values{"password": {"a brand new password"}, "password_confirmation": {"a brand new password"}})
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, "Your new password is set") {
		t.Fatalf("reset: HTTP %d\n%s", p.StatusCode, p.body)
	}
	if p := b.get(link); p.StatusCode != http.StatusNotFound {
		t.Fatalf("the link works twice: HTTP %d", p.StatusCode)
	}
	if p := signedIn.get("/settings"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session survived the reset: HTTP %d", p.StatusCode)
	}
	b.signIn("alice", "a brand new password")

	// --revoke-access (a compromised account): using the link also revokes
	// the member's API tokens; a plain link (above) left them.
	adminJSONOK(t, http.MethodPost, "/hearth/members/alice/api_tokens", `{"name":"Obsidian","expires":"30d"}`, http.StatusCreated, nil)
	var toks []json.RawMessage
	adminJSONOK(t, http.MethodGet, "/hearth/members/alice/api_tokens", "", http.StatusOK, &toks)
	if len(toks) != 1 {
		t.Fatalf("%d API tokens before the --revoke-access link, want 1", len(toks))
	}
	out, err = runHearth(t, "", "member", "reset-link", "alice", addr, "--site", testSite, "--revoke-access")
	if err != nil || !strings.Contains(out, "revokes the member's API tokens and OAuth grants") {
		t.Fatalf("--revoke-access: %q %v", out, err)
	}
	adminJSONOK(t, http.MethodGet, "/hearth/members/alice/api_tokens", "", http.StatusOK, &toks)
	if len(toks) != 1 {
		t.Fatal("making a --revoke-access link revoked the API tokens")
	}
	revoking := strings.SplitN(out, "\n", 2)[0]
	p = b.get(revoking)
	p = b.submit(p, strings.TrimPrefix(revoking, testSite), url.Values{"password": {"a password after the theft"}, "password_confirmation": {"a password after the theft"}})
	if p.StatusCode != http.StatusOK || !strings.Contains(p.body, "Your new password is set") {
		t.Fatalf("reset with --revoke-access: HTTP %d\n%s", p.StatusCode, p.body)
	}
	adminJSONOK(t, http.MethodGet, "/hearth/members/alice/api_tokens", "", http.StatusOK, &toks)
	if len(toks) != 0 {
		t.Fatalf("%d API tokens left after the --revoke-access link was used", len(toks))
	}
	b.signIn("alice", "a password after the theft")

	log := accessLogAfter(t, logFile, "/after-the-reset")
	if strings.Contains(string(log), token) || strings.Contains(string(log), token[len("hrt_"):]) {
		t.Fatalf("the reset token is in the access log:\n%s", log)
	}
}

// TestCLIMemberSessions: `caddy hearth member sessions` lists a member's
// web sessions by public id (never the cookie) and ends one or all.
func TestCLIMemberSessions(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), oauthSite))
	addr := "--address=" + testAdmin
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"correct horse"}`, http.StatusCreated, nil)
	phone, laptop, desk := newBrowser(t, testSite), newBrowser(t, testSite), newBrowser(t, testSite)
	for _, b := range []*browser{phone, laptop, desk} {
		b.signIn("alice", "correct horse")
	}
	out, err := runHearth(t, "", "member", "sessions", "alice", "--json", addr)
	var list []sessionView
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 3 {
		t.Fatalf("sessions: %q %v", out, err)
	}
	for _, b := range []*browser{phone, laptop, desk} {
		u, _ := url.Parse(testSite)
		for _, c := range b.client.Jar.Cookies(u) {
			if strings.Contains(out, c.Value) {
				t.Fatal("a session cookie is in the list")
			}
		}
	}
	if list[0].Address == "" || list[0].Device == "" || list[0].LastSeenAt.IsZero() {
		t.Fatalf("session without metadata: %+v", list[0])
	}
	out, err = runHearth(t, "", "member", "sessions", "alice", addr)
	if err != nil || !strings.Contains(out, "LAST SEEN") || !strings.Contains(out, list[0].ID) {
		t.Fatalf("table: %q %v", out, err)
	}
	if _, err := runHearth(t, "", "member", "sessions", "alice", "--end", "0123456789abcdef", addr); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Fatalf("ending an unknown session: %v", err)
	}
	// End one: exactly one of the three browsers is signed out.
	if out, err := runHearth(t, "", "member", "sessions", "alice", "--end", list[0].ID, addr); err != nil || !strings.Contains(out, "ended session") {
		t.Fatalf("--end: %q %v", out, err)
	}
	signedOut := 0
	for _, b := range []*browser{phone, laptop, desk} {
		if b.get("/settings").StatusCode == http.StatusSeeOther {
			signedOut++
		}
	}
	if signedOut != 1 {
		t.Fatalf("%d browsers signed out by --end, want 1", signedOut)
	}
	if out, err := runHearth(t, "", "member", "sessions", "alice", "--end-all", addr); err != nil || !strings.Contains(out, "ended 2 session(s)") {
		t.Fatalf("--end-all: %q %v", out, err)
	}
	for _, b := range []*browser{phone, laptop, desk} {
		if p := b.get("/settings"); p.StatusCode != http.StatusSeeOther {
			t.Fatalf("a session survived --end-all: HTTP %d", p.StatusCode)
		}
	}
	if _, err := runHearth(t, "", "member", "sessions", "nobody", addr); err == nil || !strings.Contains(err.Error(), `no member "nobody"`) {
		t.Fatalf("unknown member: %v", err)
	}
}

//go:build oidcinterop

package oidc_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/hearthkit/caddy-hearth"
	"github.com/hearthkit/caddy-hearth/internal/testform"
)

const (
	site     = "http://localhost:9080"
	admin    = "localhost:2999"
	callback = "http://localhost:9080/rp/callback"
	bye      = "http://localhost:9080/rp/bye"
)

func adminCall(t *testing.T, method, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+admin+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: HTTP %d: %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

// browser is the member's browser: a cookie jar, redirects shown, and the
// pages' own forms filled in.
type browser struct {
	t *testing.T
	c *http.Client
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func (b *browser) get(u string) (*http.Response, string) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.do(req)
}

func (b *browser) submit(page, action string, fields url.Values) (*http.Response, string) {
	b.t.Helper()
	if form, ok := testform.Fill(page, action, fields); ok {
		req, _ := http.NewRequest(http.MethodPost, site+action, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", site)
		return b.do(req)
	}
	b.t.Fatalf("no form posting to %s:\n%s", action, page)
	return nil, ""
}

// TestOpenIDClient: openid-client signs a member in and uses every
// endpoint a relying party uses.
func TestOpenIDClient(t *testing.T) {
	if _, err := os.Stat("node_modules/openid-client"); err != nil {
		t.Fatal("openid-client is not installed: run (cd interop/oidc && npm ci)")
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(fmt.Sprintf(`{
	admin %s
	http_port 9080
	https_port 9443
	skip_install_trust
	hearth {
		storage_dir %q
	}
}
%s {
	hearth_oauth
	respond "site"
}
`, admin, t.TempDir(), site), "caddyfile")
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+admin+"/load", strings.NewReader(`{"admin":{"listen":"`+admin+`"}}`))
		req.Header.Set("Content-Type", "application/json")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	})
	adminCall(t, http.MethodPost, "/hearth/members", `{"username":"alice","password":"alice's password","display_name":"Alice"}`, nil)
	adminCall(t, http.MethodPut, "/hearth/members/alice/groups", `{"groups":["staff"]}`, nil)
	adminCall(t, http.MethodPut, "/hearth/members/alice/email", `{"email":"alice@example.org","verified":true}`, nil)
	var client struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	adminCall(t, http.MethodPost, "/hearth/clients", fmt.Sprintf(`{"name":"openid-client","redirect_uris":[%q],"post_logout_redirect_uris":[%q],
		"scopes":["openid","profile","email","groups","offline_access"]}`, callback, bye), &client)

	cmd := exec.Command("node", "rp.mjs")
	cmd.Env = append(os.Environ(), "HEARTH_ISSUER="+site+"/", "HEARTH_CLIENT_ID="+client.ClientID,
		"HEARTH_CLIENT_SECRET="+client.ClientSecret, "HEARTH_REDIRECT_URI="+callback, "HEARTH_POST_LOGOUT_URI="+bye)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	next := func(v any) {
		t.Helper()
		if !lines.Scan() {
			_ = cmd.Wait()
			t.Fatalf("openid-client stopped: %s", stderr.String())
		}
		if err := json.Unmarshal(lines.Bytes(), v); err != nil {
			t.Fatalf("openid-client said %q: %v", lines.Text(), err)
		}
	}
	var start struct{ Authorize string }
	next(&start)

	jar, _ := cookiejar.New(nil)
	b := &browser{t: t, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	// Without a session the authorization page is the sign-in form.
	res, signIn := b.get(start.Authorize)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("authorize without a session: HTTP %d", res.StatusCode)
	}
	res, _ = b.submit(signIn, "/auth/sign_in", url.Values{"username": {"alice"}, "password": {"alice's password"}})
	_, consent := b.get(site + res.Header.Get("Location"))
	res, _ = b.submit(consent, "/oauth/authorize", url.Values{"decision": {"approve"}})
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), callback+"?") {
		t.Fatalf("approval: HTTP %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	fmt.Fprintln(stdin, res.Header.Get("Location"))

	var got struct {
		Sub, Nonce, Username, Email string
		Groups                      []string
		Rotated                     bool
		RefreshedIDTokenSub         string `json:"refreshed_id_token_sub"`
		Reuse                       string
		ActiveAfterReuse            bool   `json:"active_after_reuse"`
		EndSession                  string `json:"end_session"`
		UserinfoSub                 string `json:"userinfo_sub"`
	}
	next(&got)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("openid-client: %v\n%s", err, stderr.String())
	}
	if got.Sub == "" || got.UserinfoSub != got.Sub || got.RefreshedIDTokenSub != got.Sub || got.Username != "alice" ||
		got.Email != "alice@example.org" || strings.Join(got.Groups, ",") != "staff" || got.Nonce == "" {
		t.Errorf("claims seen by openid-client: %+v", got)
	}
	if !got.Rotated || got.Reuse != "invalid_grant" || got.ActiveAfterReuse {
		t.Errorf("refresh: rotated %v, reuse %q, family's access token active after reuse %v", got.Rotated, got.Reuse, got.ActiveAfterReuse)
	}
	res, page := b.get(got.EndSession)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("end session page: HTTP %d", res.StatusCode)
	}
	res, _ = b.submit(page, "/oauth/logout", url.Values{"decision": {"sign_out"}})
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != bye+"?state=bye" {
		t.Errorf("end session: HTTP %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
}

//go:build browser

package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hearthkit/caddy-hearth/internal/testcaddy"
)

// oauth2-proxy in front of a Caddy route, with Hearth as its OpenID
// provider, walked in Chromium. The version is pinned here and built from
// the module proxy (go install …@version: its own go.mod, not ours).
const oauth2ProxyModule = "github.com/oauth2-proxy/oauth2-proxy/v7@v7.15.6"

const (
	o2pHome     = "http://localhost:18280"     // Hearth: the provider and its sign-in pages
	o2pApp      = "http://app.localhost:18281" // Caddy's route to oauth2-proxy
	o2pListen   = "127.0.0.1:18283"            // oauth2-proxy
	o2pUpstream = "http://127.0.0.1:18282/"    // the app: Caddy answering with what it was told
	o2pCallback = o2pApp + "/oauth2/callback"  // the client's redirect URI
	o2pAfterBye = o2pApp + "/"                 // its post-logout redirect URI
	o2pEcho     = "user={http.request.header.X-Forwarded-User} email={http.request.header.X-Forwarded-Email} " +
		"username={http.request.header.X-Forwarded-Preferred-Username} groups={http.request.header.X-Forwarded-Groups}"
)

func oauth2ProxyCaddyfile(dir string) string {
	return testcaddy.GlobalOptions(admin, dir, "") + fmt.Sprintf(`%s {
	bind 127.0.0.1
	hearth_oauth {
		instance_title %q
	}
}
%s {
	bind 127.0.0.1
	reverse_proxy %s
}
%s {
	bind 127.0.0.1
	respond %q
}
`, o2pHome, siteTitle, o2pApp, o2pListen,
		// Any host: oauth2-proxy passes the app's Host header upstream.
		"http://:"+strings.TrimPrefix(strings.TrimSuffix(o2pUpstream, "/"), "http://127.0.0.1:"), o2pEcho)
}

// oauth2Proxy returns the path of oauth2-proxy: $HEARTH_OAUTH2_PROXY (the
// CI stage builds it first, at oauth2ProxyModule's version), or the pinned
// version built here (cached by Go's build cache after the first time).
func oauth2Proxy(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HEARTH_OAUTH2_PROXY"); p != "" {
		return p
	}
	bin := t.TempDir()
	cmd := exec.Command("go", "install", oauth2ProxyModule)
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", oauth2ProxyModule, err, out)
	}
	return filepath.Join(bin, "oauth2-proxy")
}

// adminJSON calls Caddy's admin API with a JSON body.
func adminJSON(t *testing.T, method, path string, in, out any) {
	t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(method, "http://"+admin+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: HTTP %d", method, path, res.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOAuth2ProxyInChromium: a member opens an app behind oauth2-proxy,
// signs in on Hearth's pages, reaches the app with her identity in
// oauth2-proxy's headers, and signs out of both (oauth2-proxy's sign-out,
// then Hearth's end-session endpoint, which sends her back to the app,
// which asks her to sign in again).
func TestOAuth2ProxyInChromium(t *testing.T) {
	proxy := oauth2Proxy(t)
	dir := t.TempDir()
	testcaddy.Start(t, oauth2ProxyCaddyfile(dir))
	testcaddy.AddMember(t, admin, member, password)
	adminJSON(t, http.MethodPut, "/hearth/members/"+member+"/email", map[string]any{"email": "alice@example.org", "verified": true}, nil)
	adminJSON(t, http.MethodPut, "/hearth/members/"+member+"/groups", map[string]any{"groups": []string{"staff"}}, nil)
	var client struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	adminJSON(t, http.MethodPost, "/hearth/clients", map[string]any{
		"name": "Dashboards", "redirect_uris": []string{o2pCallback}, "post_logout_redirect_uris": []string{o2pAfterBye},
		"scopes": []string{"openid", "profile", "email", "groups"},
	}, &client)

	// The flags of docs/single-sign-on.md, with this test's addresses; the
	// issuer with its trailing slash, as discovery gives it.
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, proxy,
		"--provider=oidc", "--provider-display-name=Hearth", "--oidc-issuer-url="+o2pHome+"/",
		"--client-id="+client.ClientID, "--client-secret="+client.ClientSecret, "--code-challenge-method=S256",
		"--redirect-url="+o2pCallback, "--scope=openid profile email groups",
		"--email-domain=*", "--allowed-group=staff", "--cookie-secret=0123456789abcdef0123456789abcdef",
		"--cookie-secure=false", "--upstream="+o2pUpstream, "--http-address="+o2pListen,
		"--skip-provider-button", "--reverse-proxy", "--whitelist-domain="+strings.TrimPrefix(o2pHome, "http://"))
	logs, err := os.Create(filepath.Join(dir, "oauth2-proxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("oauth2-proxy's log:\n%s", b)
		}
	})
	ready := false
	for i := 0; i < 200 && !ready; i++ {
		if res, err := http.Get("http://" + o2pListen + "/ping"); err == nil {
			res.Body.Close()
			ready = res.StatusCode == http.StatusOK
		}
		if !ready {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !ready {
		t.Fatal("oauth2-proxy does not answer /ping")
	}

	s := newSuite(t)
	s.base = o2pHome
	// The app sends the browser to Hearth's authorization endpoint, which
	// shows the sign-in form.
	s.run("open the app", chromedp.Navigate(o2pApp+"/reports?month=11"))
	s.waitAcross("Hearth's sign-in page", `location.origin === "`+o2pHome+`" && !!document.getElementById("username")`)
	s.check("oauth2-proxy-sign-in")
	s.run("type the password",
		chromedp.SendKeys("#username", member, chromedp.ByID),
		chromedp.SendKeys("#password", password, chromedp.ByID))
	s.run("sign in", chromedp.Click(`main form button[type=submit]`, chromedp.ByQuery))
	// The first time, Hearth asks the member to let the app know who she is.
	s.waitAcross("the consent page or the app", `location.origin === "`+o2pApp+`" || !!document.querySelector('button[name=decision][value=approve]')`)
	if strings.HasPrefix(s.location(), o2pHome) {
		s.check("oauth2-proxy-consent")
		s.run("continue", chromedp.Click(`button[name=decision][value=approve]`, chromedp.ByQuery))
	}
	s.waitAcross("the app", `location.href === "`+o2pApp+`/reports?month=11" && document.body.innerText.startsWith("user=")`)
	var body string
	s.run("read the app's page", chromedp.Evaluate(`document.body.innerText`, &body))
	for _, want := range []string{"email=alice@example.org", "username=alice", "groups=staff"} {
		if !strings.Contains(body, want) {
			t.Errorf("the app saw %q, want %q in it", body, want)
		}
	}

	// Sign out: oauth2-proxy ends its cookie and sends the browser to
	// Hearth's end-session endpoint, where the member confirms; Hearth ends
	// her session and returns to the app, which sends her to sign in again.
	logout := o2pHome + "/oauth/logout?" + url.Values{"client_id": {client.ClientID}, "post_logout_redirect_uri": {o2pAfterBye}}.Encode()
	s.run("sign out of the app", chromedp.Navigate(o2pApp+"/oauth2/sign_out?rd="+url.QueryEscape(logout)))
	s.waitAcross("Hearth's sign-out page", `location.origin === "`+o2pHome+`" && !!document.querySelector('button[name=decision][value=sign_out]')`)
	s.check("oauth2-proxy-sign-out")
	s.run("sign out of Hearth", chromedp.Click(`button[name=decision][value=sign_out]`, chromedp.ByQuery))
	s.waitAcross("signed out everywhere: the app asks for a sign-in again", `location.origin === "`+o2pHome+`" && !!document.getElementById("username")`)
	s.run("open the app again", chromedp.Navigate(o2pApp+"/reports"))
	s.waitAcross("Hearth's sign-in page again", `location.origin === "`+o2pHome+`" && !!document.getElementById("username")`)
}

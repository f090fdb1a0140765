package caddymodule

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLogoutHintNotInAccessLog: RP-initiated logout carries an ID token in
// its URL (id_token_hint), as a relying party sends the browser there;
// Caddy's access log must not receive it, whether the hint is this site's
// or not, and the page shown must not pass its URL on as a Referer.
func TestLogoutHintNotInAccessLog(t *testing.T) {
	logFile := startWithAccessLog(t, "hearth_oauth")
	const hint = "eyJhbGciOiJSUzI1NiJ9.eyJEb05vdExvZ1RoaXNIaW50In0.DoNotLogThisHintSignature"
	req, _ := http.NewRequest(http.MethodGet, testSite+"/oauth/logout?"+url.Values{"id_token_hint": {hint}, "state": {"bye"}}.Encode(), nil)
	req.Header.Set("Accept", "text/html")
	resp, _ := send(t, req)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("logout with a hint this site did not sign: HTTP %d, want 400", resp.StatusCode)
	}
	if rp := resp.Header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Errorf("Referrer-Policy %q on the logout page, want no-referrer", rp)
	}
	log := accessLogAfter(t, logFile, "/after-the-logout")
	if strings.Contains(string(log), "DoNotLogThis") {
		t.Fatalf("the ID token is in the access log:\n%s", log)
	}
}

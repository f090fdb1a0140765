package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A member sent by an app's authorization request to sign in sees which
// app asks before typing a password; the sign-in page reached otherwise
// names none.
func TestSignInSaysWhichAppAsks(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), fmt.Sprintf("%s {\n\thearth_oauth\n}\n", testSite)))
	id, _ := registerApp(t, url.Values{"client_name": {"Pleroma Reader"}, "redirect_uris": {"urn:ietf:wg:oauth:2.0:oob"}, "scopes": {"read"}})
	resp, err := http.Get(testSite + "/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {id},
		"redirect_uri": {"urn:ietf:wg:oauth:2.0:oob"}, "scope": {"read"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Path != "/auth/sign_in" || !strings.Contains(string(b), "Pleroma Reader asks to use your account here.") {
		t.Fatalf("sign-in from the app: %s HTTP %d\n%s", resp.Request.URL, resp.StatusCode, b)
	}
	resp, err = http.Get(testSite + "/auth/sign_in?return_to=%2Fsettings")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "asks to use your account") {
		t.Fatalf("the plain sign-in page names an app:\n%s", b)
	}
}

package caddymodule

import (
	"net/http"
	"strings"
	"testing"
)

// TestFeedSecretNotInAccessLog: a feed URL carries the member's feed
// secret in its path, as the inbound URL does; Caddy's access log must
// not receive it.
func TestFeedSecretNotInAccessLog(t *testing.T) {
	logFile := startWithAccessLog(t, "hearth_graphql")
	const secret = "fd_DoNotLogThisSecretAbCdEfGhIjKlMnOpQrStUv"
	for _, p := range []string{"/atom", "/opds?q=in:inbox", "/epub?q=label:x"} {
		resp, err := http.Get(testSite + "/api/feed/" + secret + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s with an unknown secret: HTTP %d, want 404", p, resp.StatusCode)
		}
	}
	log := accessLogAfter(t, logFile, "/after-the-feed-gets")
	if strings.Contains(string(log), "DoNotLogThisSecret") {
		t.Fatalf("the feed secret is in the access log:\n%s", log)
	}
}

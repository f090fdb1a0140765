package caddymodule

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestCapabilityURLsNotInAccessLog: URLs that carry their own credential
// (a feed's secret, an Omnivore content download link, an OpenID logout's
// id_token_hint) must not reach Caddy's access log, whatever the answer;
// the logout page must not pass its URL on as a Referer either.
func TestCapabilityURLsNotInAccessLog(t *testing.T) {
	for _, c := range []struct {
		name, module string
		paths        []string
		status       int
		html         bool // asked as a browser asks (the logout page)
	}{
		{"feed", "hearth_graphql", []string{
			"/api/feed/fd_DoNotLogThisSecretAbCdEfGhIjKlMnOpQrStUv/atom",
			"/api/feed/fd_DoNotLogThisSecretAbCdEfGhIjKlMnOpQrStUv/opds?q=in:inbox",
			"/api/feed/fd_DoNotLogThisSecretAbCdEfGhIjKlMnOpQrStUv/epub?q=label:x",
			"/api/feed/i/1/2/0/DoNotLogThisSignatureAbCdEfGhIj",
		}, http.StatusNotFound, false},
		{"content download", "hearth_graphql", []string{
			"/api/content/download/cl_DoNotLogThisSecretAbCdEfGhIjKlMnOpQrStUv",
		}, http.StatusNotFound, false},
		// A hint this site did not sign: 400, logged all the same.
		{"logout hint", "hearth_oauth", []string{
			"/oauth/logout?" + url.Values{"id_token_hint": {"eyJhbGciOiJSUzI1NiJ9.eyJEb05vdExvZ1RoaXNIaW50In0.DoNotLogThisHintSignature"},
				"state": {"bye"}}.Encode(),
		}, http.StatusBadRequest, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			logFile := startWithAccessLog(t, c.module)
			for _, p := range c.paths {
				req, _ := http.NewRequest(http.MethodGet, testSite+p, nil)
				if c.html {
					req.Header.Set("Accept", "text/html")
				}
				resp, _ := send(t, req)
				if resp.StatusCode != c.status {
					t.Fatalf("GET %s: HTTP %d, want %d", p, resp.StatusCode, c.status)
				}
				if rp := resp.Header.Get("Referrer-Policy"); c.html && rp != "no-referrer" {
					t.Errorf("Referrer-Policy %q on the page, want no-referrer", rp)
				}
			}
			log := accessLogAfter(t, logFile, "/after-the-"+strings.ReplaceAll(c.name, " ", "-"))
			if strings.Contains(string(log), "DoNotLogThis") {
				t.Fatalf("the %s's secret is in the access log:\n%s", c.name, log)
			}
		})
	}
}

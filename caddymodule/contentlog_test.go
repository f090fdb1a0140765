package caddymodule

import (
	"net/http"
	"strings"
	"testing"
)

// TestContentDownloadLinkNotInAccessLog: a content download link from
// Omnivore's POST /api/content carries its capability in its path, as a
// feed URL does; Caddy's access log must not receive it.
func TestContentDownloadLinkNotInAccessLog(t *testing.T) {
	logFile := startWithAccessLog(t, "hearth_graphql")
	const secret = "cl_DoNotLogThisSecretAbCdEfGhIjKlMnOpQrStUv"
	resp, err := http.Get(testSite + "/api/content/download/" + secret)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a download link that does not exist: HTTP %d, want 404", resp.StatusCode)
	}
	log := accessLogAfter(t, logFile, "/after-the-download")
	if strings.Contains(string(log), "DoNotLogThisSecret") {
		t.Fatalf("the download link's secret is in the access log:\n%s", log)
	}
}

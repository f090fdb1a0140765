package caddymodule

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInboundSecretNotInAccessLog: a newsletter inbound URL carries the
// member's secret in its path; Caddy's access log, configured by the
// operator with the log directive, must not receive it. Other requests
// are still logged.
func TestInboundSecretNotInAccessLog(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(t.TempDir(), "access.log")
	startHearth(t, hearthCaddyfile(dir, fmt.Sprintf(`%s {
	log {
		output file %q
		format json
	}
	hearth_graphql
	respond "site"
}
`, testSite, logFile)))
	const secret = "nl_DoNotLogThisSecretAbCdEfGhIjKlMnOpQrStUv"
	resp, err := http.Post(testSite+"/api/newsletters/inbound/"+secret, "message/rfc822", strings.NewReader("Subject: hi\r\n\r\nbody"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Fatalf("unknown inbound secret: HTTP %d, want a 4xx", resp.StatusCode)
	}
	resp, err = http.Get(testSite + "/after-the-inbound-post")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Caddy writes the access log line when the response is done; the file
	// logger is unbuffered, so the second request's line is there now or
	// very soon.
	var log []byte
	for i := 0; i < 200; i++ {
		if log, _ = os.ReadFile(logFile); strings.Contains(string(log), "/after-the-inbound-post") {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !strings.Contains(string(log), "/after-the-inbound-post") {
		t.Fatalf("the access log has no line for a plain request:\n%s", log)
	}
	if strings.Contains(string(log), "DoNotLogThisSecret") {
		t.Fatalf("the inbound secret is in the access log:\n%s", log)
	}
}

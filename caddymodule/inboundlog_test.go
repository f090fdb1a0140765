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
	logFile := startWithAccessLog(t, "hearth_graphql")
	const secret = "nl_DoNotLogThisSecretAbCdEfGhIjKlMnOpQrStUv"
	resp, err := http.Post(testSite+"/api/newsletters/inbound/"+secret, "message/rfc822", strings.NewReader("Subject: hi\r\n\r\nbody"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Fatalf("unknown inbound secret: HTTP %d, want a 4xx", resp.StatusCode)
	}
	log := accessLogAfter(t, logFile, "/after-the-inbound-post")
	if strings.Contains(string(log), "DoNotLogThisSecret") {
		t.Fatalf("the inbound secret is in the access log:\n%s", log)
	}
}

// TestMailWebhookSecretNotInAccessLog: the mail webhook's shared secret
// comes in a request header (mail_webhook_header), and Caddy's access log
// records request headers, redacting only Authorization and Cookie. The
// secret must not reach the access log, whether the webhook accepts the
// request or refuses a wrong secret; other requests are still logged.
func TestMailWebhookSecretNotInAccessLog(t *testing.T) {
	const secret = "whsec_DoNotLogThisWebhookSecretAbCdEfGhIjKl"
	t.Setenv("HEARTH_TEST_MAIL_SECRET", secret)
	logFile := startWithAccessLog(t, `hearth_graphql {
		mail_webhook_secret {env.HEARTH_TEST_MAIL_SECRET}
		mail_domain in.example.org
	}`)
	for _, sent := range []string{secret, secret + "-DoNotLogThisWrongOne"} {
		req, err := http.NewRequest(http.MethodPost, testSite+"/api/inbox/items/mail-webhook", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Webhook-Secret", sent)
		resp, _ := send(t, req)
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("webhook with an empty payload: HTTP %d, want a 4xx", resp.StatusCode)
		}
	}
	log := accessLogAfter(t, logFile, "/after-the-webhook-post")
	if strings.Contains(string(log), "DoNotLogThis") {
		t.Fatalf("the webhook secret is in the access log:\n%s", log)
	}
}

// startWithAccessLog starts Hearth with Caddy's JSON access log in a file,
// as an operator configures it with the log directive, and handler (then
// respond "site") on testSite; it returns the log's path.
func startWithAccessLog(t *testing.T, handler string) string {
	logFile := filepath.Join(t.TempDir(), "access.log")
	startHearth(t, hearthCaddyfile(t.TempDir(), fmt.Sprintf(`%s {
	log {
		output file %q
		format json
	}
	%s
	respond "site"
}
`, testSite, logFile, handler)))
	return logFile
}

// accessLogAfter makes a plain request to path and returns the access log
// once that request's line is in it.
func accessLogAfter(t *testing.T, logFile, path string) []byte {
	t.Helper()
	resp, err := http.Get(testSite + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var log []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if log, _ = os.ReadFile(logFile); strings.Contains(string(log), path) {
			return log
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("the access log has no line for a plain request:\n%s", log)
	return nil
}

// Package testcaddy starts Caddy in the test's own process from a
// Caddyfile, for the suites that drive a real Caddy with real clients
// (interop/browser, interop/inboxt-web), and finds the Chromium they drive.
package testcaddy

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// Start adapts caddyfile (its warnings logged) and loads it in this
// process, as `caddy run` does, and stops Caddy when the test ends.
func Start(t testing.TB, caddyfile string) {
	t.Helper()
	cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatalf("adapt the Caddyfile: %v\n%s", err, caddyfile)
	}
	for _, w := range warnings {
		t.Logf("Caddyfile: %s", w)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("start Caddy: %v", err)
	}
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stop Caddy: %v", err)
		}
	})
}

// GlobalOptions is the global options block of a test's Caddyfile: the
// admin API on admin, no HTTPS, Caddy's and Hearth's data under dir, and
// more (lines of the hearth block, each starting "\n\t\t").
func GlobalOptions(admin, dir, more string) string {
	return fmt.Sprintf(`{
	admin %s
	persist_config off
	auto_https off
	storage file_system %q
	hearth {
		storage_dir %q%s
	}
}
`, admin, filepath.Join(dir, "caddy-data"), filepath.Join(dir, "hearth"), more)
}

// AddMember adds a member through the admin API at admin (host:port), as
// `caddy hearth member add` does.
func AddMember(t testing.TB, admin, username, password string) {
	t.Helper()
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, password)
	resp, err := http.Post("http://"+admin+"/hearth/members", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("add member %s: HTTP %d", username, resp.StatusCode)
	}
}

// Chromium is the browser to drive: $HEARTH_CHROMIUM, else chromium on
// PATH; "" when there is neither.
func Chromium() string {
	if path := os.Getenv("HEARTH_CHROMIUM"); path != "" {
		return path
	}
	path, _ := exec.LookPath("chromium")
	return path
}

package access_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServicesNeverImportCaddy: the services under handlers/ are plain
// net/http handlers built from a store and options; neither they nor
// anything they pull in (tests included) imports Caddy or the Caddy glue
// (caddymodule, cmd/), which translates a configuration into their
// constructors.
func TestServicesNeverImportCaddy(t *testing.T) {
	const module = "github.com/hearthkit/caddy-hearth/"
	cmd := exec.Command("go", "list", "-tags", "nobadger,nomysql,nopgx", "-test",
		"-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./handlers/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list found only %d packages under handlers/", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, "github.com/caddyserver/caddy") || strings.HasPrefix(dep, module+"caddymodule") || strings.HasPrefix(dep, module+"cmd/") {
				t.Errorf("%s imports %s (directly or through another package): a service never depends on Caddy",
					strings.TrimPrefix(fields[0], module), dep)
			}
		}
	}
}

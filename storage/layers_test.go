package storage_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStorageImportsNoHigherLayer: the arrows between layers run one way.
// No package under storage/ or internal/ — their tests included — imports,
// directly or through another package, one under handlers/, caddymodule/ or
// cmd/: a helper both layers need lives under internal/ (the rate limiter
// the Badger engine counts with, for one).
func TestStorageImportsNoHigherLayer(t *testing.T) {
	const module = "github.com/hearthkit/caddy-hearth/"
	// Each package (and its test variants) with everything it pulls in,
	// transitively.
	cmd := exec.Command("go", "list", "-tags", "nobadger,nomysql,nopgx", "-test",
		"-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./storage/...", "./internal/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	higher := func(path string) bool {
		rest, ok := strings.CutPrefix(path, module)
		if !ok {
			return false
		}
		top, _, _ := strings.Cut(rest, "/")
		return top == "handlers" || top == "caddymodule" || top == "cmd"
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list found only %d packages under storage/ and internal/", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if higher(dep) {
				t.Errorf("%s imports %s (directly or through another package): a lower layer must not import a higher one",
					strings.TrimPrefix(fields[0], module), strings.TrimPrefix(dep, module))
			}
		}
	}
}

// TestOnlyTheBadgerEngineImportsBadger: the store's core, the domains and
// the backup format speak storage/kv; Badger's API (its transactions,
// garbage collection, backup frames) is storage/kv/badgerkv's alone, in
// production code (tests may look inside a Badger directory).
func TestOnlyTheBadgerEngineImportsBadger(t *testing.T) {
	cmd := exec.Command("go", "list", "-tags", "nobadger,nomysql,nopgx",
		"-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if fields[0] == "github.com/hearthkit/caddy-hearth/storage/kv/badgerkv" {
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/dgraph-io/badger") {
				t.Errorf("%s imports %s: only storage/kv/badgerkv speaks Badger", fields[0], imp)
			}
		}
	}
}

// TestStorageLayersRunDownwards: inside storage/, production code imports
// only downwards: the engines (storage/kv and below) nothing of the core or
// the domains, the core (storage, storage/internal/...) no domain. Tests
// may cross (an engine's test opens a storage_dir through the core), and
// storagetest, for tests, may import any of them.
func TestStorageLayersRunDownwards(t *testing.T) {
	const module = "github.com/hearthkit/caddy-hearth/"
	cmd := exec.Command("go", "list", "-tags", "nobadger,nomysql,nopgx",
		"-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./storage/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// layer is 0 for an engine, 1 for the core, 2 for a domain, 3 for
	// storagetest, -1 for a package outside storage/.
	layer := func(path string) int {
		rest, ok := strings.CutPrefix(path, module)
		switch {
		case !ok || (rest != "storage" && !strings.HasPrefix(rest, "storage/")):
			return -1
		case rest == "storage/kv" || strings.HasPrefix(rest, "storage/kv/"):
			return 0
		case rest == "storage" || strings.HasPrefix(rest, "storage/internal/"):
			return 1
		case rest == "storage/storagetest":
			return 3
		}
		return 2
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list found only %d packages under storage/", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		from := layer(fields[0])
		for _, dep := range fields[1:] {
			if to := layer(dep); to > from {
				t.Errorf("%s imports %s (directly or through another package): a lower layer of storage/ must not import a higher one",
					strings.TrimPrefix(fields[0], module), strings.TrimPrefix(dep, module))
			}
		}
	}
}

package storage_test

import (
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/internal/testimports"
)

// TestStorageImportsNoHigherLayer: the arrows between layers run one way.
// No package under storage/ or internal/ — their tests included — imports,
// directly or through another package, one under handlers/, caddymodule/ or
// cmd/: a helper both layers need lives under internal/ (the rate limiter
// the Badger engine counts with, for one).
func TestStorageImportsNoHigherLayer(t *testing.T) {
	const module = testimports.Module
	higher := func(path string) bool {
		rest, ok := strings.CutPrefix(path, module)
		if !ok {
			return false
		}
		top, _, _ := strings.Cut(rest, "/")
		return top == "handlers" || top == "caddymodule" || top == "cmd"
	}
	// Each package (and its test variants) with everything it pulls in,
	// transitively.
	for _, p := range testimports.List(t, testimports.Options{Deps: true, Tests: true}, 20, "storage/...", "internal/...") {
		for _, dep := range p.Imports {
			if higher(dep) {
				t.Errorf("%s imports %s (directly or through another package): a lower layer must not import a higher one",
					strings.TrimPrefix(p.Path, module), strings.TrimPrefix(dep, module))
			}
		}
	}
}

// TestOnlyTheBadgerEngineImportsBadger: the store's core, the domains and
// the backup format speak storage/kv; Badger's API (its transactions,
// garbage collection, backup frames) is storage/kv/badgerkv's alone, in
// production code (tests may look inside a Badger directory).
func TestOnlyTheBadgerEngineImportsBadger(t *testing.T) {
	for _, p := range testimports.List(t, testimports.Options{}, 0, "...") {
		if p.Path == testimports.Module+"storage/kv/badgerkv" {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/dgraph-io/badger") {
				t.Errorf("%s imports %s: only storage/kv/badgerkv speaks Badger", p.Path, imp)
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
	const module = testimports.Module
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
	for _, p := range testimports.List(t, testimports.Options{Deps: true}, 10, "storage/...") {
		from := layer(p.Path)
		for _, dep := range p.Imports {
			if to := layer(dep); to > from {
				t.Errorf("%s imports %s (directly or through another package): a lower layer of storage/ must not import a higher one",
					strings.TrimPrefix(p.Path, module), strings.TrimPrefix(dep, module))
			}
		}
	}
}

// TestTextIndexKnowsNoDomain: the text index knows documents only by id
// and reads their texts through textindex.Texts, the seam where an
// engine's own index could answer instead. It imports nothing of the
// module but the core and the engines' interface: no domain (the
// library, members), nothing above storage/ (and the core imports no
// domain: TestStorageLayersRunDownwards).
func TestTextIndexKnowsNoDomain(t *testing.T) {
	const module = testimports.Module
	allowed := func(path string) bool {
		rest, ok := strings.CutPrefix(path, module)
		return !ok || rest == "storage" || rest == "storage/kv"
	}
	for _, p := range testimports.List(t, testimports.Options{}, 1, "storage/library/textindex") {
		for _, dep := range p.Imports {
			if !allowed(dep) {
				t.Errorf("%s imports %s: the text index knows only the core and storage/kv",
					strings.TrimPrefix(p.Path, module), strings.TrimPrefix(dep, module))
			}
		}
	}
}

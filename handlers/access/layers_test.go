package access_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/internal/testimports"
)

// TestServicesNeverImportCaddy: the services under handlers/ are plain
// net/http handlers built from a store and options; neither they nor
// anything they pull in (tests included) imports Caddy or the Caddy glue
// (caddymodule, cmd/), which translates a configuration into their
// constructors.
func TestServicesNeverImportCaddy(t *testing.T) {
	const module = testimports.Module
	for _, p := range testimports.List(t, testimports.Options{Deps: true, Tests: true}, 20, "handlers/...") {
		for _, dep := range p.Imports {
			if strings.HasPrefix(dep, "github.com/caddyserver/caddy") || strings.HasPrefix(dep, module+"caddymodule") || strings.HasPrefix(dep, module+"cmd/") {
				t.Errorf("%s imports %s (directly or through another package): a service never depends on Caddy",
					strings.TrimPrefix(p.Path, module), dep)
			}
		}
	}
}

// TestSharedPackagesImportNoService: what the services share (who a
// request acts for, Inboxt's error shapes and the Gate, the rate limiter,
// the outbound fetcher, the collectors) sits under them: none of these
// packages imports a service under handlers/, directly or through another
// package (docs/architecture.md, "The layers").
func TestSharedPackagesImportNoService(t *testing.T) {
	const module = testimports.Module
	shared := []string{"handlers/access", "handlers/inboxtapi", "handlers/ratelimit", "handlers/safefetch", "handlers/metrics"}
	for _, p := range testimports.List(t, testimports.Options{Deps: true}, len(shared), shared...) {
		for _, dep := range p.Imports {
			rest, ok := strings.CutPrefix(dep, module)
			if ok && strings.HasPrefix(rest, "handlers/") && !slices.Contains(shared, rest) {
				t.Errorf("%s imports %s (directly or through another package): a shared package must not import a service",
					strings.TrimPrefix(p.Path, module), rest)
			}
		}
	}
}

package access_test

import (
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

package graphql_test

import (
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/internal/testimports"
)

// TestOnlyTheCaddyModuleImportsGraphQL: the pages and REST routes take what
// they share with the API from the packages that hold it (the search
// language from storage/library/query, the caller from inboxtapi.Gate,
// saving from handlers/articles), never from the GraphQL package, which
// only the Caddy module builds (tests aside). Only caddymodule imports it,
// so no other package pulls it in through another.
func TestOnlyTheCaddyModuleImportsGraphQL(t *testing.T) {
	const module = testimports.Module
	for _, p := range testimports.List(t, testimports.Options{}, 30, "...") {
		pkg := strings.TrimPrefix(p.Path, module)
		if pkg == "caddymodule" || strings.HasPrefix(pkg, "handlers/graphql") {
			continue
		}
		for _, dep := range p.Imports {
			if dep == module+"handlers/graphql" {
				t.Errorf("%s imports handlers/graphql", pkg)
			}
		}
	}
}

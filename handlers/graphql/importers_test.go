package graphql_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyTheCaddyModuleImportsGraphQL: the pages and REST routes take what
// they share with the API from the packages that hold it (the search
// language from storage/library/query, the caller from inboxtapi.Gate,
// saving from handlers/articles), never from the GraphQL package, which
// only the Caddy module builds (tests aside). Only caddymodule imports it,
// so no other package pulls it in through another.
func TestOnlyTheCaddyModuleImportsGraphQL(t *testing.T) {
	const module = "github.com/hearthkit/caddy-hearth/"
	cmd := exec.Command("go", "list", "-tags", "nobadger,nomysql,nopgx",
		"-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 30 {
		t.Fatalf("go list found only %d packages", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if pkg == "caddymodule" || strings.HasPrefix(pkg, "handlers/graphql") {
			continue
		}
		for _, dep := range fields[1:] {
			if dep == module+"handlers/graphql" {
				t.Errorf("%s imports handlers/graphql", pkg)
			}
		}
	}
}

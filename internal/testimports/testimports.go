// Package testimports lists what the module's packages import, as go list
// says, for the tests that keep the arrows between the layers one way.
package testimports

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// Module is the module's path with a slash: what the paths List reports
// start with.
const Module = "github.com/hearthkit/caddy-hearth/"

// Package is a package with the packages it imports.
type Package struct {
	Path string
	// Imports are its direct imports, or with Options.Deps everything
	// it pulls in, transitively.
	Imports []string
}

// Options choose what List reports.
type Options struct {
	// Deps lists everything a package pulls in, not only its imports.
	Deps bool
	// Tests lists the packages' test variants too, with their imports.
	Tests bool
}

// List lists the module's packages matching patterns (module-relative, as
// "storage/..."), built with the tests' tags. It fails the test when go
// list fails or finds fewer than min packages.
func List(t testing.TB, o Options, min int, patterns ...string) []Package {
	t.Helper()
	field := "Imports"
	if o.Deps {
		field = "Deps"
	}
	args := []string{"list", "-tags", "nobadger,nomysql,nopgx"}
	if o.Tests {
		args = append(args, "-test")
	}
	args = append(args, "-f", "{{.ImportPath}} {{join ."+field+" \" \"}}")
	for _, p := range patterns {
		args = append(args, Module+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var list []Package
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		list = append(list, Package{Path: fields[0], Imports: fields[1:]})
	}
	if len(list) < min {
		t.Fatalf("go list found only %d packages in %s", len(list), strings.Join(patterns, " "))
	}
	return list
}

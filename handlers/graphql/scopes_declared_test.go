package graphql_test

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/hearthkit/caddy-hearth/internal/testsource"
)

// TestEveryDeclaredRouteIsListed: TestEveryRouteHoldsItsScopes asks a
// probe for every route in declaredRoutes, a list written by hand. Every
// route declaration of the services (a package-level access.Route) is in
// it: a new route left out of the list would go unchecked.
func TestEveryDeclaredRouteIsListed(t *testing.T) {
	var found []string
	testsource.Code(t, 100, func(_ string, _ *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if isRouteLiteral(v) {
						found = append(found, f.Name.Name+"."+vs.Names[i].Name)
					}
				}
			}
		}
	}, "..")
	listed := map[string]bool{}
	for _, r := range declaredRoutes() {
		if listed[r.Name] {
			t.Errorf("route %q listed twice", r.Name)
		}
		listed[r.Name] = true
	}
	if len(found) < 10 || len(found) != len(listed) {
		t.Errorf("the services declare %d routes (%v), declaredRoutes lists %d: list every one", len(found), found, len(listed))
	}
}

// isRouteLiteral reports whether e is an access.Route{…} literal.
func isRouteLiteral(e ast.Expr) bool {
	c, ok := e.(*ast.CompositeLit)
	if !ok {
		return false
	}
	sel, ok := c.Type.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Route" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "access"
}

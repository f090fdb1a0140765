package access_test

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/internal/testsource"
)

// TestOneReaderOfTheAuthorizationHeader: one parser of bearer tokens
// (Bearer), so every route takes a token by the same rules. Besides it,
// only Omnivore's bare API key (bareAPIKey, which falls back to Bearer's
// answer) and the OAuth token endpoint's Basic client credentials
// (basicCredentials, not a caller's token) read the Authorization header
// in the code serving requests (handlers/ and caddymodule/, tests aside).
func TestOneReaderOfTheAuthorizationHeader(t *testing.T) {
	allowed := []string{"handlers/access/access.go Bearer", "handlers/access/barekey.go bareAPIKey",
		"handlers/oauth/oidc_token.go basicCredentials"}
	var found []string
	testsource.Code(t, 100, func(path string, _ *token.FileSet, f *ast.File) {
		rel, _ := filepath.Rel("../..", path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok && readsAuthorization(c) {
					found = append(found, filepath.ToSlash(rel)+" "+fn.Name.Name)
				}
				return true
			})
		}
	}, "../../handlers", "../../caddymodule")
	for _, f := range found {
		if !slices.Contains(allowed, f) {
			t.Errorf("%s reads the Authorization header: take the caller through access.Bearer (access.Authenticator)", f)
		}
	}
	for _, a := range allowed {
		if !slices.Contains(found, a) {
			t.Errorf("%s no longer reads the Authorization header: the check would not see another reader", a)
		}
	}
}

// readsAuthorization reports whether c is x.Get("Authorization") or
// x.Values("Authorization").
func readsAuthorization(c *ast.CallExpr) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Get" && sel.Sel.Name != "Values") || len(c.Args) != 1 {
		return false
	}
	lit, ok := c.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, _ := strconv.Unquote(lit.Value)
	return strings.EqualFold(s, "Authorization")
}

package access_test

import (
	"errors"
	"go/ast"
	"go/token"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/access"
	"github.com/hearthkit/caddy-hearth/storage/grants"

	"github.com/hearthkit/caddy-hearth/internal/testsource"
)

// The one bearer parser: "Bearer <token>", the scheme in any case (RFC
// 6750 section 2.1 and RFC 9110's case-insensitive schemes), spaces around
// the token ignored; anything else is malformed, no header is no token.
func TestBearer(t *testing.T) {
	cases := []struct {
		header  string
		token   string
		present bool
		err     error
	}{
		{"", "", false, nil},
		{"Bearer hat_abc", "hat_abc", true, nil},
		{"bearer hat_abc", "hat_abc", true, nil},
		{"BEARER   hat_abc  ", "hat_abc", true, nil},
		{"Bearer", "", true, access.ErrMalformed},
		{"Bearer    ", "", true, access.ErrMalformed},
		{"Bearerhat_abc", "", true, access.ErrMalformed},
		{"Basic dXNlcjpwYXNz", "", true, access.ErrMalformed},
		{"Bearer\thatabc", "", true, access.ErrMalformed},
	}
	for _, c := range cases {
		r, _ := http.NewRequest(http.MethodGet, "http://example.org/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		tok, present, err := access.Bearer(r)
		if tok != c.token || present != c.present || !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("%q: %q %v %v, want %q %v %v", c.header, tok, present, err, c.token, c.present, c.err)
		}
	}
}

// A route's AnyScope: one of them is enough; the broad scopes cover their
// granular ones; sessions and API tokens hold every scope.
func TestMay(t *testing.T) {
	route := access.Route{Name: "GET /x", AnyScope: []string{"profile", "read:accounts"}}
	for scopes, want := range map[string]bool{"profile": true, "read": true, "read:accounts": true, "write": false, "read:statuses": false} {
		c := &access.Caller{OAuth: &grants.AccessToken{Scopes: []string{scopes}}}
		if err := c.May(route); (err == nil) != want || err != nil && !access.IsScopeError(err) {
			t.Errorf("%s: %v", scopes, err)
		}
	}
	for _, c := range []*access.Caller{{Session: true}, {Key: "api:1"}} {
		if err := c.May(route); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (&access.Caller{OAuth: &grants.AccessToken{}}).May(access.Route{}); err != nil {
		t.Errorf("a route without scopes: %v", err)
	}
}

// Tokens are looked up in one place: outside this package no code calls
// grants' Token or apitokens' Member (a route that did would skip the
// declared scopes and the shared parser), nor parses a bearer token itself.
func TestTokensAreLookedUpOnlyHere(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	lookups := map[string]string{"grants": "Token", "apitokens": "Member"}
	testsource.Code(t, 100, func(path string, _ *token.FileSet, f *ast.File) {
		rel, _ := filepath.Rel(root, path)
		if filepath.Dir(rel) == filepath.Join("handlers", "access") {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				of, ok := n.X.(*ast.CallExpr)
				if !ok {
					return true
				}
				if fn, ok := of.Fun.(*ast.SelectorExpr); ok && fn.Sel.Name == "Of" {
					if pkg, ok := fn.X.(*ast.Ident); ok && lookups[pkg.Name] == n.Sel.Name {
						t.Errorf("%s: %s.Of(…).%s looks up a token outside handlers/access", rel, pkg.Name, n.Sel.Name)
					}
				}
			case *ast.CallExpr:
				// strings.EqualFold(scheme, "Bearer"), strings.HasPrefix(h, "Bearer ")…
				fn, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := fn.X.(*ast.Ident); !ok || pkg.Name != "strings" {
					return true
				}
				for _, a := range n.Args {
					if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING &&
						strings.EqualFold(strings.TrimSpace(strings.Trim(lit.Value, "\"`")), "bearer") {
						t.Errorf("%s: parses a bearer token outside handlers/access", rel)
					}
				}
			}
			return true
		})
	}, root)
}

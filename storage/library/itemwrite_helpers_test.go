package library

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/internal/testsource"
)

// The key families list their encoders and the store's writes by hand. A
// new encoder of a family's keys (a function returning one) or a helper
// that writes the key it is handed, left out of those lists, would let
// another file write an item's keys unseen by TestOnlyTheItemWriterWritesItemKeys.
// This runs the same checks with the lists completed from the package's
// source: every function returning a key of the family is one of its
// encoders, every function handing a []byte parameter to a store write is
// a store write.
func TestOnlyTheItemWriterWritesItemKeysThroughAnyHelper(t *testing.T) {
	funcs := packageFuncs(t)
	defer func(old []string) { storeWrites = old }(storeWrites)
	storeWrites = keyWritingFuncs(funcs, storeWrites)
	t.Logf("store writes %v", storeWrites)
	for _, c := range []struct {
		fam     keyFamily
		atLeast int
	}{{itemKeys, 20}, {fenceKeys, 5}, {listKeys, 8}} {
		fam := c.fam
		fam.encoders = familyEncoders(funcs, fam)
		t.Logf("%v: encoders %v", fam.files, fam.encoders[len(c.fam.encoders):])
		onlyFilesWrite(t, fam, c.atLeast)
	}
}

// packageFuncs parses the package's files (tests aside) and returns their
// functions.
func packageFuncs(t *testing.T) []*ast.FuncDecl {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []*ast.FuncDecl
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				out = append(out, fn)
			}
		}
	}
	if len(out) < 100 {
		t.Fatalf("only %d functions read: the parse no longer finds the package", len(out))
	}
	return out
}

// familyEncoders is fam's encoders and, to a fixed point, every function
// returning one []byte whose return statement gives a key made by one of
// them or with storage.Key and one of fam's names.
func familyEncoders(funcs []*ast.FuncDecl, fam keyFamily) []string {
	enc := slices.Clone(fam.encoders)
	for changed := true; changed; {
		changed = false
		for _, fn := range funcs {
			if fn.Recv != nil || slices.Contains(enc, fn.Name.Name) || !returnsOneKey(fn) {
				continue
			}
			f := fam
			f.encoders = enc
			if returnsKey(fn, f) {
				enc, changed = append(enc, fn.Name.Name), true
			}
		}
	}
	return enc
}

// returnsOneKey reports whether fn's one result is a []byte.
func returnsOneKey(fn *ast.FuncDecl) bool {
	r := fn.Type.Results
	if r == nil || len(r.List) != 1 || len(r.List[0].Names) > 1 {
		return false
	}
	a, ok := r.List[0].Type.(*ast.ArrayType)
	if !ok || a.Len != nil {
		return false
	}
	id, ok := a.Elt.(*ast.Ident)
	return ok && id.Name == "byte"
}

// returnsKey reports whether one of fn's return statements gives a key of
// fam (made there, or held by a variable assigned one).
func returnsKey(fn *ast.FuncDecl, fam keyFamily) bool {
	isKey := func(e ast.Node, held map[string]bool) bool {
		found := false
		ast.Inspect(e, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				found = found || held[n.Name]
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && slices.Contains(fam.encoders, id.Name) {
					found = true
				}
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Key" && storageKeyOf(n.Args, fam.names) {
					found = true
				}
			}
			return !found
		})
		return found
	}
	held := map[string]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok {
			for i, r := range a.Rhs {
				if id, ok := a.Lhs[min(i, len(a.Lhs)-1)].(*ast.Ident); ok && isKey(r, held) {
					held[id.Name] = true
				}
			}
		}
		return true
	})
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false // a closure's return is not fn's
		}
		if r, ok := n.(*ast.ReturnStmt); ok {
			for _, e := range r.Results {
				found = found || isKey(e, held)
			}
		}
		return !found
	})
	return found
}

// keyWritingFuncs is writes and, to a fixed point, every function that
// hands one of its []byte (or [][]byte) parameters to one of them.
func keyWritingFuncs(funcs []*ast.FuncDecl, writes []string) []string {
	out := slices.Clone(writes)
	for changed := true; changed; {
		changed = false
		for _, fn := range funcs {
			if slices.Contains(out, fn.Name.Name) {
				continue
			}
			params := keyParams(fn)
			if len(params) == 0 {
				continue
			}
			found := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || found {
					return !found
				}
				var name string
				switch f := call.Fun.(type) {
				case *ast.Ident:
					name = f.Name
				case *ast.SelectorExpr:
					name = f.Sel.Name
				}
				if !slices.Contains(out, name) {
					return true
				}
				for _, a := range call.Args {
					ast.Inspect(a, func(n ast.Node) bool {
						if id, ok := n.(*ast.Ident); ok && params[id.Name] {
							found = true
						}
						return !found
					})
				}
				return !found
			})
			if found {
				out, changed = append(out, fn.Name.Name), true
			}
		}
	}
	return out
}

// keyParams are the names of fn's parameters of type []byte or [][]byte.
func keyParams(fn *ast.FuncDecl) map[string]bool {
	out := map[string]bool{}
	for _, f := range fn.Type.Params.List {
		typ := f.Type
		if a, ok := typ.(*ast.ArrayType); ok && a.Len == nil {
			if inner, ok := a.Elt.(*ast.ArrayType); ok && inner.Len == nil {
				typ = inner
			}
		}
		a, ok := typ.(*ast.ArrayType)
		if !ok || a.Len != nil {
			continue
		}
		if id, ok := a.Elt.(*ast.Ident); !ok || id.Name != "byte" {
			continue
		}
		for _, n := range f.Names {
			out[n.Name] = true
		}
	}
	return out
}

// TestNoOtherPackageMakesLibraryKeys: the checks above read this package
// only; no other package of the repository (tests aside) makes a key of
// the library's families with storage.Key, so none writes one either.
func TestNoOtherPackageMakesLibraryKeys(t *testing.T) {
	var names []string
	for _, fam := range []keyFamily{itemKeys, fenceKeys, listKeys} {
		names = append(names, fam.names...)
	}
	testsource.Code(t, 100, func(path string, fset *token.FileSet, f *ast.File) {
		// This package's own files, not its subpackages' (the text index).
		if filepath.Dir(path) == filepath.Join("..", "..", "storage", "library") {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Key" && storageKeyOf(c.Args, names) {
					t.Errorf("%s makes a key of the library's: only storage/library does", fset.Position(c.Pos()))
				}
			}
			return true
		})
	}, filepath.Join("..", ".."))
}

package library

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The files that may write an item and the keys derived from it: the
// writer (writeItem, removeItem) and the search indexer's catch-up, which
// rebuilds those keys for stores written before them.
var itemWriterFiles = []string{"itemwrite.go", "searchcatchup.go"}

// itemKeyEncoders make the keys of an item and those derived from it.
var itemKeyEncoders = []string{
	"itemKey", "contentKey", "urlKey", "messageIDKey", "itemMessageIDKey", "itemIndexPrefix", "itemIndexKeys",
	"labelItemKey", "itemsVersionKey", "importKeyKey", "siteItemKey", "siteNameKey", "siteItemsPrefix", "typeItemsPrefix",
	"highlightedItemsPrefix", "orderedTypePrefix", "orderedHighlightedPrefix", "orderedLabelPrefix",
	"orderedFilterKeys", "filterCountKey", "textReadyKey", "textKey", "imageKey", "imageListKey", "imageUsageKey",
}

// itemKeyNames are the names under u/<member>/gql/ of those keys, for
// keys made with storage.Key directly.
var itemKeyNames = []string{"item", "content", "url", "msgid", "msgof", "ix", "li", "impkey", "sd", "sn", "ty",
	"hh", "oy", "oh", "ol", "fc", "tv", "tt", "img", "imgs", "imgbytes", "iv"}

// itemDerivedWriters write keys derived from an item; only the writer's
// files call them.
var itemDerivedWriters = []string{
	"setItemText", "syncHighlightCopies", "putFilterKeys", "writeFilterKeys", "writeOrderedKeys",
	"countItemFilters", "firstItemReady", "recountFilters", "buildSearchKeys", "writeLabelLinks",
	"writeIndexEntries", "writeLookupKeys", "putTombstone", "putItemImage", "removeItemImages",
}

// textIndexWriters are the text index's methods that write its queue and
// documents, called on memberIndex(...).
var textIndexWriters = []string{"Queue", "Remove"}

// storeWrites are the calls that write or delete keys.
var storeWrites = []string{"Put", "PutJSON", "Delete", "DeletePrefix", "DeletePrefixInBatches", "putCount", "deleteIfPresent"}

// itemKeyWrites lists, for each file of the package (tests aside), the
// places where it writes an item's keys or calls a writer of them.
func itemKeyWrites(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			for _, pos := range itemKeyWritesIn(fn.Body) {
				out[name] = append(out[name], fset.Position(pos).String()+" in "+fn.Name.Name)
			}
		}
	}
	return out
}

// itemKeyWritesIn finds in body the calls that write a key made by an
// item key encoder (directly, or through a variable assigned or ranged
// from one) and the calls of the derived writers.
func itemKeyWritesIn(body *ast.BlockStmt) []token.Pos {
	tainted := map[string]bool{}
	isItemKey := func(e ast.Node) bool {
		found := false
		ast.Inspect(e, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if tainted[n.Name] {
					found = true
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && slices.Contains(itemKeyEncoders, id.Name) {
					found = true
				}
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Key" && storageKeyOfItem(n.Args) {
					found = true
				}
			}
			return !found
		})
		return found
	}
	// Variables holding item keys, to a fixed point.
	for changed := true; changed; {
		changed = false
		taint := func(lhs []ast.Expr) {
			for _, l := range lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" && !tainted[id.Name] {
					tainted[id.Name], changed = true, true
				}
			}
		}
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for _, r := range n.Rhs {
					if isItemKey(r) {
						taint(n.Lhs)
					}
				}
			case *ast.RangeStmt:
				if isItemKey(n.X) && n.Value != nil {
					taint([]ast.Expr{n.Value})
				}
			}
			return true
		})
	}
	var out []token.Pos
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		var name string
		switch fun := call.Fun.(type) {
		case *ast.Ident:
			name = fun.Name
		case *ast.SelectorExpr:
			if pkg, ok := fun.X.(*ast.Ident); ok && slices.Contains([]string{"slices", "maps", "bytes", "strings"}, pkg.Name) {
				return true // slices.Delete and the like write no key
			}
			name = fun.Sel.Name
			if slices.Contains(textIndexWriters, name) && callsMemberIndex(fun.X) {
				out = append(out, call.Pos())
				return true
			}
		}
		if slices.Contains(itemDerivedWriters, name) {
			out = append(out, call.Pos())
			return true
		}
		if slices.Contains(storeWrites, name) && slices.ContainsFunc(call.Args, func(a ast.Expr) bool { return isItemKey(a) }) {
			out = append(out, call.Pos())
		}
		return true
	})
	return out
}

// storageKeyOfItem reports whether storage.Key's arguments name one of
// itemKeyNames under "gql".
func storageKeyOfItem(args []ast.Expr) bool {
	for i := 0; i+1 < len(args); i++ {
		if lit(args[i]) == "gql" && slices.Contains(itemKeyNames, lit(args[i+1])) {
			return true
		}
	}
	return false
}

// callsMemberIndex reports whether e calls memberIndex.
func callsMemberIndex(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "memberIndex" {
				found = true
			}
		}
		return !found
	})
	return found
}

func lit(e ast.Expr) string {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		s, _ := strconv.Unquote(b.Value)
		return s
	}
	return ""
}

// Only writeItem's and removeItem's file (and the catch-up that rebuilds
// derived keys for older stores) writes an item or a key derived from it:
// every save, import, fetch and update goes through them.
func TestOnlyTheItemWriterWritesItemKeys(t *testing.T) {
	writes := itemKeyWrites(t)
	for file, places := range writes {
		if !slices.Contains(itemWriterFiles, file) {
			t.Errorf("%s writes keys derived from saved items outside %v:\n\t%s", file, itemWriterFiles, strings.Join(places, "\n\t"))
		}
	}
	// The check sees the writer's own writes (it would see another's).
	if n := len(writes["itemwrite.go"]); n < 20 {
		t.Errorf("the check found %d writes in itemwrite.go, want at least 20: %v", n, writes["itemwrite.go"])
	}
}

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

// keyFamily is a family of keys and the files that alone may write them.
type keyFamily struct {
	// files may write the family's keys.
	files []string
	// encoders make the keys; names are their names under u/<member>/gql/,
	// for keys made with storage.Key directly.
	encoders, names []string
	// writers write the family's keys; only files call them.
	writers []string
	// textIndex: the text index's writes (memberIndex(...).Queue and
	// Remove) belong to the family.
	textIndex bool
}

// itemKeys: an item and the keys derived from it, written by the writer
// (writeItem, removeItem) and the search indexer's catch-up, which
// rebuilds those keys for stores written before them.
var itemKeys = keyFamily{
	files: []string{"itemwrite.go", "itemcounts.go", "searchcatchup.go"},
	encoders: []string{
		"itemKey", "contentKey", "urlKey", "messageIDKey", "itemMessageIDKey", "itemIndexPrefix", "itemIndexKeys",
		"labelItemKey", "itemsVersionKey", "importKeyKey", "siteItemKey", "siteNameKey", "siteItemsPrefix", "typeItemsPrefix",
		"highlightedItemsPrefix", "orderedTypePrefix", "orderedHighlightedPrefix", "highlightedTitlePrefix", "orderedLabelPrefix",
		"orderedFilterKeys", "appendItemIndexKeys", "appendOrderedKeys", "filterCountKey", "textReadyKey", "textKey", "imageKey", "imageListKey", "imageUsageKey",
		"readingCursorKey",
	},
	names: []string{"item", "content", "url", "msgid", "msgof", "ix", "li", "impkey", "sd", "sn", "ty",
		"hh", "oy", "oh", "ot", "ol", "fc", "tv", "tt", "img", "imgs", "imgbytes", "iv", "rc"},
	writers: []string{
		"writeItemWith", "setItemText", "syncHighlightCopies", "putFilterKeys", "writeFilterKeys", "writeOrderedKeys",
		"countItemFilters", "countItemReading", "countReading", "recountReading", "countFence", "itemsChanged", "firstItemReady", "recountFilters", "buildSearchKeys",
		"writeLabelLinks", "writeIndexEntries", "writeLookupKeys", "putTombstone", "putItemImage", "removeItemImages",
	},
	textIndex: true,
}

// fenceKeys: the offsets' fences, counts of the items in the createdAt
// order, built by the first offset asked and moved at each commit by the
// item writer's tallies (countFence), both in offsets.go.
var fenceKeys = keyFamily{
	files:    []string{"offsets.go"},
	encoders: []string{"fencePrefix", "fenceReadyKey"},
	names:    []string{"of", "ov"},
}

// listKeys: a member's labels and saved queries, whose every write sets
// the lists version that listsCache checks (listsChanged).
var listKeys = keyFamily{
	files:    []string{"labels.go", "listscache.go"},
	encoders: []string{"labelKey", "labelNameKey", "legacyLabelNameKey", "savedQueryKey", "listsVersionKey"},
	names:    []string{"label", "labelname", "sq", "lv"},
	writers:  []string{"listsChanged", "deleteLabelNameKeys"},
}

// textIndexWriters are the text index's methods that write its queue and
// documents, called on memberIndex(...).
var textIndexWriters = []string{"Queue", "Remove"}

// storeWrites are the calls that write or delete keys.
var storeWrites = []string{"Put", "PutEach", "PutJSON", "Delete", "DeletePrefix", "DeletePrefixInBatches", "putCount", "deleteIfPresent"}

// keyWrites lists, for each file of the package (tests aside), the places
// where it writes a key of fam or calls a writer of them.
func keyWrites(t *testing.T, fam keyFamily) map[string][]string {
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
			for _, pos := range fam.writesIn(fn.Body) {
				out[name] = append(out[name], fset.Position(pos).String()+" in "+fn.Name.Name)
			}
		}
	}
	return out
}

// writesIn finds in body the calls that write a key made by one of fam's
// encoders (directly, or through a variable assigned or ranged from one,
// or the key a scan of such a prefix hands its function) and the calls of
// fam's writers.
func (fam keyFamily) writesIn(body *ast.BlockStmt) []token.Pos {
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
	// Variables holding item keys, to a fixed point.
	for changed := true; changed; {
		changed = false
		taint := func(lhs []ast.Expr) {
			for _, l := range lhs {
				// A field (sc.keys) taints the variable that holds it.
				for {
					if sel, ok := l.(*ast.SelectorExpr); ok {
						l = sel.X
						continue
					}
					break
				}
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
			case *ast.CallExpr:
				// tx.Scan(prefix, …, func(k, v []byte) …): k is a key
				// of the family when prefix is.
				var fn *ast.FuncLit
				keyed := false
				for _, a := range n.Args {
					if f, ok := a.(*ast.FuncLit); ok {
						fn = f
					} else if isItemKey(a) {
						keyed = true
					}
				}
				if keyed && fn != nil && len(fn.Type.Params.List) > 0 && len(fn.Type.Params.List[0].Names) > 0 {
					taint([]ast.Expr{fn.Type.Params.List[0].Names[0]})
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
			if fam.textIndex && slices.Contains(textIndexWriters, name) && callsMemberIndex(fun.X) {
				out = append(out, call.Pos())
				return true
			}
		}
		if slices.Contains(fam.writers, name) {
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

// storageKeyOf reports whether storage.Key's arguments name one of names
// under "gql".
func storageKeyOf(args []ast.Expr, names []string) bool {
	for i := 0; i+1 < len(args); i++ {
		if lit(args[i]) == "gql" && slices.Contains(names, lit(args[i+1])) {
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

// onlyFilesWrite fails when a file outside fam.files writes fam's keys,
// or when the check finds fewer than atLeast writes in fam.files (it would
// then not see another file's either).
func onlyFilesWrite(t *testing.T, fam keyFamily, atLeast int) {
	t.Helper()
	writes := keyWrites(t, fam)
	seen := 0
	for file, places := range writes {
		if !slices.Contains(fam.files, file) {
			t.Errorf("%s writes keys that only %v may write:\n\t%s", file, fam.files, strings.Join(places, "\n\t"))
			continue
		}
		seen += len(places)
	}
	if seen < atLeast {
		t.Errorf("the check found %d writes in %v, want at least %d: %v", seen, fam.files, atLeast, writes)
	}
}

// Only writeItem's and removeItem's file (and the catch-up that rebuilds
// derived keys for older stores) writes an item or a key derived from it:
// every save, import, fetch and update goes through them. The offsets'
// fences, counts of the items, are offsets.go's alone.
func TestOnlyTheItemWriterWritesItemKeys(t *testing.T) {
	onlyFilesWrite(t, itemKeys, 20)
	onlyFilesWrite(t, fenceKeys, 5)
	// The check sees the writer's own writes of keys built in its
	// buffers (itemScratch's fields), or it would not see another file's.
	seen := strings.Join(keyWrites(t, itemKeys)["itemwrite.go"], "\n")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "itemwrite.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "PutEach" {
				calls++
				if pos := fset.Position(c.Pos()).String(); !strings.Contains(seen, pos+" ") {
					t.Errorf("the check does not see the write at %s", pos)
				}
			}
		}
		return true
	})
	if calls == 0 {
		t.Error("itemwrite.go writes no key with PutEach: this check's premise is gone")
	}
}

// Only labels.go (and listscache.go's listsChanged, which it calls) writes
// a label or saved query: each such write sets the lists version that the
// lists cache of every node checks.
func TestOnlyLabelsWriteListKeys(t *testing.T) {
	onlyFilesWrite(t, listKeys, 8)
}

package caddymodule

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Written Go code (not generated, not tests) stays readable in parts: no
// file past maxFileLines, no function past maxFuncLines. The aim is about
// 800 and 120; the bounds leave room for a small change, not for a file
// or function that has become two.
const (
	maxFileLines = 850
	maxFuncLines = 130
)

func TestNoFileOrFunctionTooLong(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := walkRepo(func(name string) error {
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		rel, _ := filepath.Rel("..", name)
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s has %d lines (at most %d): split it by concern", rel, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s has %d lines (at most %d): give its parts names", rel, fn.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files read: the walk no longer finds the code", files)
	}
}

// walkRepo calls f with the name of every file of the repository (its
// root is ".."), passing over the folders .git, node_modules and testdata:
// what the tree's own code and comments hold.
func walkRepo(f func(name string) error) error {
	return filepath.WalkDir("..", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "node_modules" || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		return f(name)
	})
}

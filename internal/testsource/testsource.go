// Package testsource hands tests the repository's own code, parsed, so the
// checks that a rule of the layout holds everywhere (one reader of a
// header, one maker of a key family, every route listed) walk it the same
// way and notice when the walk no longer finds it.
package testsource

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Code parses each Go file of the code under dirs (tests, testdata,
// node_modules and hidden directories left out) and calls fn with the
// file's path under its dir and the file set its positions are in. It
// fails t on a file that does not parse, and when fewer than least files
// were read: a check that reads nothing would pass whatever the code does.
func Code(t testing.TB, least int, fn func(path string, fset *token.FileSet, f *ast.File), dirs ...string) {
	t.Helper()
	fset := token.NewFileSet()
	files := 0
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); path != dir && (n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files++
			fn(path, fset, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < least {
		t.Fatalf("only %d Go files read under %v: the walk no longer finds the code", files, dirs)
	}
}

package mcp_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs fails when this package or one under it lacks a
// "// Package name ..." comment.
func TestPackageDocs(t *testing.T) {
	t.Parallel()
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir // the Node peers live there
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		for name, p := range pkgs {
			documented := false
			for _, f := range p.Files {
				if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package "+name+" ") {
					documented = true
				}
			}
			if !documented {
				t.Errorf("package %s in %s has no doc comment", name, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

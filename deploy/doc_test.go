package deploy

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestPackagesHaveDocComments fails when a package of this room lacks a
// "// Package …" (or "// Command …") comment saying what it owns.
func TestPackagesHaveDocComments(t *testing.T) {
	for _, dir := range []string{".", "policy", "forcedcmd", "../cmd/airlock-action"} {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		for name, p := range pkgs {
			if strings.HasSuffix(name, "_test") {
				continue
			}
			doc := ""
			for _, f := range p.Files {
				if f.Doc != nil {
					doc += f.Doc.Text()
				}
			}
			if !strings.HasPrefix(doc, "Package "+name+" ") && !strings.HasPrefix(doc, "Command ") {
				t.Errorf("%s (package %s) has no package doc comment", dir, name)
			}
		}
	}
}

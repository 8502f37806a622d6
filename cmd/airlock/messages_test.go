package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// messageRoots are the packages whose errors an operator or an agent reads:
// the CLI's stderr (config check, deploy verbs, serve), airlock-action's
// stderr on targets, the API's error messages. Directories are walked
// with their subdirectories.
var messageRoots = []string{
	"deploy",
	"gateway/config",
	"gateway/engine",
	"auditchain",
	"cmd/airlock-action",
	"cmd/airlock",
	"cmd/airlock-ssh",
	"approvals",
	"sshexec",
	"gateway",
}

// messageSkipped are directories under messageRoots whose errors only
// tests read: helpers that start test peers.
var messageSkipped = map[string]bool{
	"deploy/testkit":      true, // test helpers: users, ports, waits
	"deploy/pgtest":       true, // starts a throwaway PostgreSQL for tests
	"approvals/clocktest": true, // a fake clock for tests
	"sshexec/sshtest":     true, // starts a throwaway sshd for tests
	"gateway/gatewaytest": true, // starts a gateway for tests
	"gateway/systemtest":  true, // system tests and their measurements
}

// prefixAllowed are messages that may begin with a package name, each
// with why no user reads it. Keys are "dir/file.go: the literal".
var prefixAllowed = map[string]string{}

var prefixRE = regexp.MustCompile(`^([a-z][a-z0-9]*): `)

// TestNoPackagePrefixInMessages fails on an error message that begins
// with the name of one of this module's Go packages ("engine: …",
// "securefile: …"): what a user reads says what went wrong in words of
// the install, never where in the code. It reads the literal format of
// every fmt.Errorf and errors.New, and the strings an Error method
// returns, in the packages whose errors reach users.
func TestNoPackagePrefixInMessages(t *testing.T) {
	root := filepath.Join("..", "..")
	names := modulePackageNames(t, root)
	fset := token.NewFileSet()
	var found []string
	for _, r := range messageRoots {
		err := filepath.WalkDir(filepath.Join(root, r), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if messageSkipped[rel] || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, lit := range messageLiterals(f) {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					continue
				}
				m := prefixRE.FindStringSubmatch(s)
				if m == nil || !names[m[1]] {
					continue
				}
				if _, ok := prefixAllowed[rel+": "+s]; ok {
					continue
				}
				found = append(found, fset.Position(lit.Pos()).String()+": "+strconv.Quote(s))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		t.Errorf("%d messages begin with a Go package's name; say what went wrong and the fix in the user's words instead (or, for a message only a debug log shows, add it to prefixAllowed with why):\n  %s",
			len(found), strings.Join(found, "\n  "))
	}
}

// messageLiterals returns the string literals that become error text in
// f: the format of fmt.Errorf, the text of errors.New, and what an Error
// method returns (the first operand of a concatenation) or formats with
// fmt.Sprintf or fmt.Fprintf.
func messageLiterals(f *ast.File) []*ast.BasicLit {
	var lits []*ast.BasicLit
	first := func(args []ast.Expr) {
		if len(args) > 0 {
			if l, ok := args[0].(*ast.BasicLit); ok && l.Kind == token.STRING {
				lits = append(lits, l)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "fmt" && sel.Sel.Name == "Errorf" || x.Name == "errors" && sel.Sel.Name == "New") {
					first(n.Args)
				}
			}
		case *ast.FuncDecl:
			if n.Recv == nil || n.Name.Name != "Error" || n.Body == nil {
				return true
			}
			ast.Inspect(n.Body, func(m ast.Node) bool {
				switch m := m.(type) {
				case *ast.ReturnStmt:
					for _, r := range m.Results {
						for b, ok := r.(*ast.BinaryExpr); ok; b, ok = r.(*ast.BinaryExpr) {
							r = b.X
						}
						if l, ok := r.(*ast.BasicLit); ok && l.Kind == token.STRING {
							lits = append(lits, l)
						}
					}
				case *ast.CallExpr:
					if sel, ok := m.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" {
						first(m.Args)
					} else if ok && sel.Sel.Name == "Fprintf" && len(m.Args) > 1 {
						first(m.Args[1:])
					}
				}
				return true
			})
		}
		return true
	})
	return lits
}

// modulePackageNames returns the name of every Go package in the module
// but main.
func modulePackageNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if n := f.Name.Name; n != "main" {
			names[n] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !names["engine"] || !names["securefile"] {
		t.Fatalf("found the packages %v, which lack engine and securefile: is the module root %s?", names, root)
	}
	return names
}

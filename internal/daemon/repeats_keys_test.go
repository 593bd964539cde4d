package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// detailKeys are the attributes the services log with warnings and errors
// that are details of a line, not what it is about (see Repeats).
var detailKeys = []string{
	"error", "reason", "pid", "peer_pid", "until", "since", "bytes", "limit", "panic",
	"messages", "endpoints", "held", "maybe_written", "outcome", "result", "output", "attempt",
}

// Every attribute key a warning or error is logged with is known to be
// identifying or detail: a new key that names what a line is about must
// join identifyingKeys, or Repeats would take lines about different things
// for repeats of one.
func TestEveryLoggedAttributeIsClassified(t *testing.T) {
	fset := token.NewFileSet()
	seen := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "../.." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Warn" && sel.Sel.Name != "Error") || len(call.Args) < 3 || !message(call.Args[0]) {
				return true
			}
			for i := 1; i < len(call.Args); i += 2 {
				lit, ok := call.Args[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true // not key, value pairs
				}
				key, _ := strconv.Unquote(lit.Value)
				seen[key] = fset.Position(lit.Pos()).String()
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 10 {
		t.Fatalf("found only %d keys: %v", len(seen), seen)
	}
	for key, where := range seen {
		if !identifyingKeys[key] && !slices.Contains(detailKeys, key) {
			t.Errorf("%s: attribute %q is neither identifying (identifyingKeys) nor detail (detailKeys)", where, key)
		}
	}
}

// message reports whether e is a log call's message: a string, or strings
// joined ("refusing "+what+" over it").
func message(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.STRING
	case *ast.BinaryExpr:
		return e.Op == token.ADD && (message(e.X) || message(e.Y))
	}
	return false
}

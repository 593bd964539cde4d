package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// raceFree are the packages the Makefile's RACE_FREE runs without the race
// detector.
func raceFree(t *testing.T) []string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mk)) {
		if rest, ok := strings.CutPrefix(line, "RACE_FREE :="); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatal("the Makefile has no RACE_FREE line")
	return nil
}

// The race detector reports races between goroutines; `make test` runs a
// package without it only when neither its code nor its tests start one,
// so that it cannot miss anything there. A `go` statement added to such a
// package fails here until the package leaves RACE_FREE.
func TestRaceFreePackagesStartNoGoroutine(t *testing.T) {
	pkgs := raceFree(t)
	if len(pkgs) == 0 {
		t.Fatal("RACE_FREE names no package")
	}
	for _, pkg := range pkgs {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("RACE_FREE names %s, which holds no Go file", pkg)
			continue
		}
		for _, name := range files {
			if where := goStatement(t, name); where != "" {
				t.Errorf("%s starts a goroutine (%s): take %s out of RACE_FREE so its tests run under the race detector", name, where, pkg)
			}
		}
	}
}

// goStatement is where the file's first go statement is, or "".
func goStatement(t *testing.T, name string) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	where := ""
	ast.Inspect(f, func(n ast.Node) bool {
		if g, ok := n.(*ast.GoStmt); ok && where == "" {
			where = fset.Position(g.Pos()).String()
		}
		return where == ""
	})
	return where
}

// The check sees a go statement where there is one.
func TestGoStatementFindsAGoroutine(t *testing.T) {
	name := filepath.Join(t.TempDir(), "g.go")
	src := "package p\n\nfunc f() {\n\tgo func() {}()\n}\n"
	if err := os.WriteFile(name, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if where := goStatement(t, name); !strings.HasSuffix(where, ":4:2") {
		t.Errorf("go statement found at %q, want line 4", where)
	}
}

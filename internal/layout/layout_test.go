package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tmux-amq/tamq/"

// apart are the module's trees and the trees none of their packages may
// depend on, directly or through another package, test code included.
var apart = []struct {
	tree      string
	forbidden []string
}{
	{"internal/tamq", []string{"internal/engine"}},
	{"internal/engine", []string{"internal/tamq"}},
	{"internal/config", []string{"internal/engine", "internal/tamq"}},
}

// listed is what `go list -json` says of one package.
type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// own is a package's path in the module ("internal/tamq/service"), without
// the module and the test binary a test variant is built for; "" for a
// package not of the module.
func own(path string) string {
	path, _, _ = strings.Cut(path, " [")
	rel, ok := strings.CutPrefix(path, module)
	if !ok {
		return ""
	}
	return rel
}

// in says whether the module's package rel is tree or under it.
func in(rel, tree string) bool {
	return rel == tree || strings.HasPrefix(rel, tree+"/")
}

// TestTheProgramsStandSideBySide fails for every package of a tree in apart
// that depends on a forbidden tree, naming the chain of imports that leads
// there (its tests' imports included: `go list -test`).
func TestTheProgramsStandSideBySide(t *testing.T) {
	args := []string{"list", "-deps", "-test", "-json=ImportPath,Imports,Deps"}
	for _, a := range apart {
		args = append(args, module+a.tree+"/...")
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]*listed{}
	var order []string
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		pkgs[p.ImportPath] = &p
		order = append(order, p.ImportPath)
	}
	checked, reported := 0, map[string]bool{}
	for _, path := range order {
		p := pkgs[path]
		rel := own(path)
		for _, a := range apart {
			if rel == "" || !in(rel, a.tree) {
				continue
			}
			checked++
			for _, dep := range p.Deps {
				for _, f := range a.forbidden {
					if d := own(dep); d == "" || !in(d, f) || in(d, a.tree) {
						continue
					}
					// One report per import that crosses: the last step of
					// the chain, from the package that imports the forbidden
					// one.
					c := chain(pkgs, path, dep)
					crossing := strings.Join(c[len(c)-2:], " imports ")
					if !reported[crossing] {
						reported[crossing] = true
						t.Errorf("%s: %s may depend on nothing under %s (move what both need below both); %s",
							crossing, a.tree, f, strings.Join(c, " -> "))
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatalf("go list named none of the packages to check:\n%s", out)
	}
}

// chain is the shortest path of imports from the package from to the
// package to, each by its path in the module.
func chain(pkgs map[string]*listed, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		at := queue[0]
		queue = queue[1:]
		if at == to {
			var c []string
			for ; at != ""; at = prev[at] {
				c = append(c, own(at))
			}
			slices.Reverse(c)
			return c
		}
		if p := pkgs[at]; p != nil {
			for _, imp := range p.Imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = at
					queue = append(queue, imp)
				}
			}
		}
	}
	return []string{own(from), "...", own(to)}
}

package layout

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the module's root, from this package's directory.
const root = "../.."

// packageDirs are the repository's directories holding Go files
// ("cmd/tamq", "internal/tamq/service", and the module clustertest's
// "clustertest/engine"), found on disk so that a package added or removed is
// seen without the go tool.
func packageDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		if !slices.Contains(dirs, rel) {
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	return dirs
}

// readmeLayout is the README's Layout block: a path per entry, first on its
// line, followed by what it holds.
func readmeLayout(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []string
	section, block := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = line == "## Layout"
		case section && strings.HasPrefix(line, "```"):
			if block {
				return entries
			}
			block = true
		case section && block && line != "" && line[0] != ' ':
			entries = append(entries, strings.TrimSuffix(strings.Fields(line)[0], "/"))
		}
	}
	t.Fatal("README.md has no ## Layout section with a code block")
	return nil
}

// TestTheReadmeListsEveryPackage keeps the README's Layout block and the
// packages on disk the same: each package is an entry of its own, and each
// entry is a directory that exists.
func TestTheReadmeListsEveryPackage(t *testing.T) {
	entries := readmeLayout(t)
	for _, dir := range packageDirs(t) {
		if !slices.Contains(entries, dir) {
			t.Errorf("README.md's Layout does not list %s: add a line for it", dir)
		}
	}
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(root, e)); err != nil || !fi.IsDir() {
			t.Errorf("README.md's Layout lists %s, which is not a directory of the repository", e)
		}
	}
}

// pathInDocs is a repository path as docs/layout.md writes it, in backticks.
var pathInDocs = regexp.MustCompile("`((?:cmd|internal|tools|clustertest)/[a-z0-9/_-]+)`")

// TestTheLayoutDocNamesEveryPackage keeps docs/layout.md true to the code:
// it names every package, and every package path it names exists.
func TestTheLayoutDocNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, m := range pathInDocs.FindAllStringSubmatch(string(b), -1) {
		named = append(named, strings.TrimSuffix(m[1], "/"))
	}
	for _, dir := range packageDirs(t) {
		if !slices.Contains(named, dir) {
			t.Errorf("docs/layout.md does not name `%s`: say what it holds and where it stands", dir)
		}
	}
	for _, n := range named {
		if _, err := os.Stat(filepath.Join(root, n)); err != nil {
			t.Errorf("docs/layout.md names `%s`, which does not exist", n)
		}
	}
}

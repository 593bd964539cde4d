package beads

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A database's stamp moves when bd writes it (a new manifest, a grown
// journal, an edited config) and not when bd only reads it (Dolt rewrites
// the same manifest and touches its store's files).
func TestStampMovesWithWritesOnly(t *testing.T) {
	repo := t.TempDir()
	store := filepath.Join(repo, ".beads", "embeddeddolt", "alpha", ".dolt", "noms")
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(rel, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, ".beads", rel), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("config.yaml", "prefix: alpha\n")
	write("last-touched", "alpha-a1")
	write("embeddeddolt/alpha/.dolt/noms/manifest", "5:__DOLT__:root-1")
	write("embeddeddolt/alpha/.dolt/noms/journal.idx", "0123")
	stamp := func() string {
		t.Helper()
		s, err := stampOf(repo)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s0 := stamp()
	// A read: the same manifest written again, the store's files touched.
	later := time.Now().Add(time.Minute)
	write("embeddeddolt/alpha/.dolt/noms/manifest", "5:__DOLT__:root-1")
	os.Chtimes(filepath.Join(store, "journal.idx"), later, later)
	write("embeddeddolt/alpha/.dolt/noms/sql-server.lock", "pid")
	write("last-touched", "alpha-x9") // bd show names the issue it showed
	if stamp() != s0 {
		t.Fatal("a read moved the stamp: every look would run bd")
	}
	for name, change := range map[string]func(){
		"a new root":      func() { write("embeddeddolt/alpha/.dolt/noms/manifest", "5:__DOLT__:root-2") },
		"a grown journal": func() { write("embeddeddolt/alpha/.dolt/noms/journal.idx", "012345") },
		"an edited config": func() {
			os.Chtimes(filepath.Join(repo, ".beads", "config.yaml"), later.Add(time.Hour), later.Add(time.Hour))
		},
	} {
		before := stamp()
		change()
		if stamp() == before {
			t.Errorf("%s did not move the stamp", name)
		}
	}
}

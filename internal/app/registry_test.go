package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The service reads the registry from every request's goroutine, and the
// first reads can come at once: under -race a reader made twice without a
// lock fails this test.
func TestRegistryFromManyGoroutinesAtOnce(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "src", "net-kingdom")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	gitaDir := filepath.Join(root, "config", "gita")
	if err := os.MkdirAll(gitaDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gitaDir, "repos.csv"), []byte(repo+",net-kingdom,,\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &App{Getenv: func(k string) string {
		return map[string]string{"XDG_CONFIG_HOME": filepath.Join(root, "config"), "HOME": root}[k]
	}}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			reg, err := a.Registry()
			if err != nil {
				t.Error(err)
				return
			}
			if _, ok := reg.Lookup("net-kingdom"); !ok {
				t.Errorf("net-kingdom not in %+v", reg)
			}
		})
	}
	close(start)
	wg.Wait()
}

package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// AwaitFile returns once the file is made (here by another goroutine while
// it waits), and fails when the file never comes.
func TestAwaitFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ready")
	made := make(chan error, 1)
	go func() { made <- os.WriteFile(path, nil, 0o600) }()
	if err := AwaitFile(path, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-made; err != nil {
		t.Fatal(err)
	}
	if err := AwaitFile(filepath.Join(dir, "never"), 50*time.Millisecond); err == nil {
		t.Fatal("a file that never appears was reported")
	}
}

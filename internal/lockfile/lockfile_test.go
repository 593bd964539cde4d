package lockfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

func TestExclusiveUntilReleased(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lock")
	first, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if HolderPID(path) != os.Getpid() {
		t.Errorf("holder pid %d", HolderPID(path))
	}
	// flock locks belong to open file descriptions, so a second open in the same
	// process contends exactly like another process would.
	if _, err := TryLock(path); !errors.Is(err, ErrHeld) {
		t.Fatalf("second TryLock: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := Acquire(ctx, path); !errs.Is(err, errs.Timeout) {
		t.Fatalf("Acquire while held: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := Acquire(context.Background(), path)
		if err == nil {
			l.Release()
		}
		got <- err
	}()
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file mode %v", fi.Mode())
	}
	// A holder that says what it does, and then the usual owner again.
	other, err := TryLockFor(path, "purge")
	if err != nil {
		t.Fatal(err)
	}
	if pid, what := Holder(path); pid != os.Getpid() || what != "purge" || HolderPID(path) != os.Getpid() {
		t.Errorf("holder %d %q", pid, what)
	}
	other.Release()
	usual, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer usual.Release()
	if pid, what := Holder(path); pid != os.Getpid() || what != "" {
		t.Errorf("holder after the usual owner took it: %d %q", pid, what)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file mode %v", fi.Mode())
	}
}

func TestUnusableLockPath(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := TryLock(filepath.Join(file, "x.lock")); !errs.Is(err, errs.Storage) {
		t.Errorf("lock under a file: %v", err)
	}
}

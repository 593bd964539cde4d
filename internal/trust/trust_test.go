package trust_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/trust"
	"github.com/tmux-amq/tamq/internal/trust/trusttest"
)

// fileIn writes a file of the user's, 0644, in a new directory of the
// user's, 0755.
func fileIn(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestOpenRefusesWhatOthersCanWrite(t *testing.T) {
	trusttest.Run(t, fileIn, func(file string) error {
		b, err := trust.ReadFile(file, "test file")
		if err == nil && string(b) != "x" {
			t.Errorf("read %q", b)
		}
		return err
	})
}

// A link is followed, and the directories of both the link and its target
// must be safe: whoever may write either can change what is read.
func TestOpenChecksBothEndsOfASymlink(t *testing.T) {
	target := fileIn(t)
	link := filepath.Join(filepath.Dir(fileIn(t)), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := trust.ReadFile(link, "test file"); err != nil {
		t.Fatalf("a link to a safe file: %v", err)
	}
	for _, dir := range []string{filepath.Dir(target), filepath.Dir(link)} {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		_, err := trust.ReadFile(link, "test file")
		if !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s 0777: %v, want it refused", dir, err)
		}
		os.Chmod(dir, 0o755)
	}
	// The target's own mode counts, not the link's.
	os.Chmod(target, 0o666)
	if _, err := trust.ReadFile(link, "test file"); !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), link) {
		t.Errorf("link to a 0666 file: %v, want it refused", err)
	}
}

func TestOpenPrivateRefusesWhatOthersCanRead(t *testing.T) {
	file := fileIn(t)
	_, err := trust.OpenPrivate(file, "token file")
	if !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("0644 secret: %v", err)
	}
	if e := err.(*errs.Error); e.Hint != "chmod 600 "+file {
		t.Errorf("hint %q", e.Hint)
	}
	os.Chmod(file, 0o600)
	f, err := trust.OpenPrivate(file, "token file")
	if err != nil {
		t.Fatalf("0600 secret: %v", err)
	}
	f.Close()
}

// A FIFO planted where a file is expected must not hang the program.
func TestOpenDoesNotHangOnAFIFO(t *testing.T) {
	fifo := filepath.Join(filepath.Dir(fileIn(t)), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// With no writer it reads as empty.
	if b, err := trust.ReadFile(fifo, "test file"); err != nil || len(b) != 0 {
		t.Errorf("FIFO: %q, %v", b, err)
	}
}

func TestOpenPassesOnErrorsOfOpening(t *testing.T) {
	_, err := trust.Open(filepath.Join(t.TempDir(), "missing"), "test file")
	if !os.IsNotExist(err) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
}

package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
)

func TestAppendToCommitsOrLeavesTheFileAsItWas(t *testing.T) {
	dir := t.TempDir()
	write := func(file, text string, ok bool) {
		t.Helper()
		w, commit, err := appendTo(file, false)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, text)
		if err := commit(ok); err != nil {
			t.Fatal(err)
		}
	}
	read := func(file string) string {
		b, _ := os.ReadFile(file)
		return string(b)
	}
	file := filepath.Join(dir, "x.jsonl")
	write(file, "{\"a\":1}\n", false)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a failed export left a new file behind: %v", err)
	}
	write(file, "{\"a\":1}\n", true)
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 || read(file) != "{\"a\":1}\n" {
		t.Errorf("new file %v %q", fi.Mode(), read(file))
	}
	write(file, "{\"b\":2}\n{\"c\":", false)
	if read(file) != "{\"a\":1}\n" {
		t.Errorf("a failed append left %q", read(file))
	}
	// A last line without its newline gets one before the new lines.
	os.WriteFile(file, []byte("{\"a\":1}"), 0o600)
	write(file, "{\"b\":2}\n", true)
	if read(file) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("appended to an unterminated line: %q", read(file))
	}
	if _, _, err := appendTo(dir, false); err == nil {
		t.Error("a directory was taken as the export file")
	}
}

// refused checks that appendTo refuses file with code, saying want, and
// leaves what was there as it was.
func refused(t *testing.T, file string, force bool, code errs.Code, want string) {
	t.Helper()
	w, commit, err := appendTo(file, force)
	if err == nil {
		io.WriteString(w, "{\"v\":1}\n")
		commit(true)
		t.Fatalf("appendTo(%s) wrote to it", file)
	}
	if !errs.Is(err, code) || !strings.Contains(err.Error(), want) {
		t.Fatalf("appendTo(%s): %v (%s), want %s saying %q", file, err, errs.CodeOf(err), code, want)
	}
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A symbolic link at the export's path is refused, never followed: the file
// it points to is untouched, and a dangling link creates nothing.
func TestExportRefusesASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	os.WriteFile(target, []byte("precious\n"), 0o600)
	link := filepath.Join(dir, "x.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	refused(t, link, false, errs.PermissionDeny, "is a symbolic link, which export never follows")
	refused(t, link, true, errs.PermissionDeny, "symbolic link")
	if got := readFile(t, target); got != "precious\n" {
		t.Errorf("the link's target now holds %q", got)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	dangling := filepath.Join(dir, "dangling.jsonl")
	os.Symlink(filepath.Join(dir, "new"), dangling)
	refused(t, dangling, false, errs.PermissionDeny, "symbolic link")
	if _, err := os.Lstat(filepath.Join(dir, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dangling link's target was created: %v", err)
	}
}

// An existing file must be the user's alone: owned by them, with no group
// or other permission bits. A refused file keeps its content and mode.
func TestExportRefusesAFileOthersCanUse(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602, 0o666} {
		file := filepath.Join(dir, fmt.Sprintf("loose-%o.jsonl", mode))
		os.WriteFile(file, []byte("{\"v\":1,\"id\":\"old\"}\n"), 0o600)
		if err := os.Chmod(file, mode); err != nil {
			t.Fatal(err)
		}
		refused(t, file, true, errs.PermissionDeny, fmt.Sprintf("other users may read or write it (mode %o)", mode))
		fi, _ := os.Stat(file)
		if got := readFile(t, file); got != "{\"v\":1,\"id\":\"old\"}\n" || fi.Mode().Perm() != mode {
			t.Errorf("refused file %o changed: %q, mode %o", mode, got, fi.Mode().Perm())
		}
	}
	_, _, err := appendTo(filepath.Join(dir, "loose-644.jsonl"), false)
	if e := (*errs.Error)(nil); !errors.As(err, &e) || !strings.Contains(e.Hint, "chmod 600") {
		t.Errorf("the hint does not say what to do: %v", err)
	}
}

func TestExportRefusesAFileOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	file := filepath.Join(t.TempDir(), "theirs.jsonl")
	os.WriteFile(file, []byte("theirs\n"), 0o600)
	if err := os.Chown(file, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	refused(t, file, true, errs.PermissionDeny, "it is owned by uid 65534, not by you (uid 0)")
	if got := readFile(t, file); got != "theirs\n" {
		t.Errorf("their file now holds %q", got)
	}
}

// A new export file is not created where other users can write (like /tmp,
// sticky or not) unless --force; with it, it is created 0600 as anywhere.
func TestExportCreatesInASharedDirectoryOnlyWithForce(t *testing.T) {
	for _, mode := range []os.FileMode{0o777 | os.ModeSticky, 0o777, 0o703} {
		dir := filepath.Join(t.TempDir(), "shared")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "x.jsonl")
		refused(t, file, false, errs.PermissionDeny, "its directory "+dir+" is writable by other users")
		if _, err := os.Lstat(file); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("mode %v: a refused export created its file: %v", mode, err)
		}
		w, commit, err := appendTo(file, true)
		if err != nil {
			t.Fatalf("mode %v, --force: %v", mode, err)
		}
		io.WriteString(w, "{\"v\":1}\n")
		if err := commit(true); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 || readFile(t, file) != "{\"v\":1}\n" {
			t.Errorf("mode %v, --force: %v %v", mode, fi, err)
		}
		// Once it is there and private, it is appended to without --force.
		w, commit, err = appendTo(file, false)
		if err != nil {
			t.Fatalf("appending to an own private file in mode %v: %v", mode, err)
		}
		io.WriteString(w, "{\"v\":2}\n")
		commit(true)
	}
}

// A FIFO is refused before it is opened: nothing blocks on it.
func TestExportRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	refused(t, fifo, true, errs.Usage, "is not a regular file")
}

package daemon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// logLine is line i of the tests' logs: 100 bytes, numbered at its end.
func logLine(i int) []byte {
	n := strconv.Itoa(i)
	return []byte(strings.Repeat("x", 99-len(n)) + n + "\n")
}

// Security issue 37 (low): the daemons' log files grew without bound. A
// log file is rotated before it grows over its size, NAME.1 the newest old
// one, and the old ones beyond the count kept are deleted at once: the
// log never takes more than (keep+1) × size. Every file is 0600 (a 0644
// one from before is made private first); after each rotation the new file
// is handed on (FollowStdio points stdout and stderr at it); the files
// kept hold the last lines written, whole and in order.
func TestLogFileIsRotatedAndBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tamq.log")
	if err := os.WriteFile(path, []byte("from before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var followed []os.FileInfo
	const size, keep = 10_000, 2
	lf, err := OpenLog(path, size, keep, func(f *os.File) error {
		fi, err := f.Stat()
		followed = append(followed, fi)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 || len(followed) != 1 || !os.SameFile(fi, followed[0]) {
		t.Fatalf("the log file from before: %v, handed on %d times", fi.Mode().Perm(), len(followed))
	}
	// 1000 lines of 100 bytes, 100 to a file: with the 12 bytes from
	// before, the rotations come before lines 99, 199, …, 999.
	const lines = 1000
	for i := range lines {
		if _, err := lf.Write(logLine(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(followed) != 1+10 {
		t.Errorf("the new file was handed on %d times over ten rotations", len(followed)-1)
	}
	if cur, _ := os.Stat(path); !os.SameFile(cur, followed[len(followed)-1]) {
		t.Error("what was handed on last is not the current log file")
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if want := []string{path, path + ".1", path + ".2"}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	var all []byte
	for _, f := range []string{path + ".2", path + ".1", path} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 || fi.Size() > size {
			t.Errorf("%s: mode %v, %d bytes", filepath.Base(f), fi.Mode().Perm(), fi.Size())
		}
		b, _ := os.ReadFile(f)
		all = append(all, b...)
	}
	got := bytes.SplitAfter(all, []byte("\n"))
	got = got[:len(got)-1]
	if len(got) != 100+100+1 {
		t.Fatalf("%d lines kept", len(got))
	}
	for i, l := range got {
		if want := logLine(lines - len(got) + i); !bytes.Equal(l, want) {
			t.Fatalf("line %d of those kept: %q, want %q", i, l, want)
		}
	}
}

// What another descriptor on the log file appends (the daemon's stderr:
// a crash trace, a library's line) is kept: no writer overwrites another,
// before a rotation and after it.
func TestLogFileKeepsWhatStderrAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tamq.log")
	var stderr *os.File
	lf, err := OpenLog(path, 1000, 1, func(f *os.File) error {
		// What FollowStdio does, on a descriptor of the test's own.
		if stderr != nil {
			stderr.Close()
		}
		fd, err := unix.Dup(int(f.Fd()))
		stderr = os.NewFile(uintptr(fd), "stderr")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { lf.Close(); stderr.Close() }()
	for i := range 15 { // a rotation before line 10
		lf.Write(logLine(i))
		fmt.Fprintf(stderr, "stderr %d\n", i)
	}
	b, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if want := string(logLine(10)) + "stderr 10\n"; !strings.HasPrefix(string(b), want) || !strings.HasSuffix(string(b), "stderr 14\n") ||
		strings.Count(string(b), "stderr") != 5 || !strings.HasSuffix(string(old), string(logLine(9))+"stderr 9\n") {
		t.Errorf("the current file:\n%s\nthe old one:\n%s", b, old)
	}
}

// A rotation that cannot be made (the new file cannot be opened: no
// descriptor left, say) moves nothing; the lines go on into the file as it
// is, and the rotation is tried again a sixteenth of the size later, not
// at every line.
func TestLogFileRotationThatFailsLosesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tamq.log")
	lf, err := OpenLog(path, 3200, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	// A directory where the new file is made, not empty: it cannot be.
	if err := os.MkdirAll(filepath.Join(path+".new", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 33 { // the rotation fails before line 32
		if _, err := lf.Write(logLine(i)); err != nil {
			t.Fatal(err)
		}
	}
	os.RemoveAll(path + ".new")
	lf.Write(logLine(33)) // 3400 bytes: not tried again yet
	if b, _ := os.ReadFile(path); len(b) != 3400 {
		t.Fatalf("%d bytes in the log after a failed rotation", len(b))
	}
	if _, err := os.Stat(path + ".1"); err == nil {
		t.Fatal("the rotation was tried again at the next line")
	}
	lf.Write(logLine(34))
	b, _ := os.ReadFile(path)
	old, _ := os.ReadFile(path + ".1")
	if !bytes.Equal(b, logLine(34)) || len(old) != 3400 {
		t.Errorf("after the rotation could be made: %d bytes in the log, %d in the old file", len(b), len(old))
	}
}

// Package trusttest holds the cases every reader of a file checked by
// internal/trust is tested with, so each place shows the same rule holds
// there: files and directories others can write are refused, naming the path
// and the fix; the user's own file is accepted, in a sticky shared directory
// too.
package trusttest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Nobody is the other user of the tests (nobody), as in the socket tests.
const Nobody = 65534

// Run runs the cases. layout makes, in a fresh directory of the user's
// (0755), a valid file for use to read and returns its path; use reads it
// as the program does and returns its error.
func Run(t *testing.T, layout func(t *testing.T) string, use func(file string) error) {
	t.Helper()
	cases := []struct {
		name string
		root bool // needs root (chown)
		// spoil changes file or dir, and returns the path the error must
		// name and the fix its hint must hold; "" is accepted.
		spoil func(t *testing.T, file, dir string) (named, fix string)
	}{
		{"own file 0644", false, func(t *testing.T, file, dir string) (string, string) {
			chmod(t, file, 0o644)
			return "", ""
		}},
		{"file 0666", false, func(t *testing.T, file, dir string) (string, string) {
			chmod(t, file, 0o666)
			return file, "chmod go-w " + file
		}},
		{"file 0620", false, func(t *testing.T, file, dir string) (string, string) {
			chmod(t, file, 0o620)
			return file, "chmod go-w " + file
		}},
		{"file of another user", true, func(t *testing.T, file, dir string) (string, string) {
			chown(t, file)
			return file, "chown " + uid() + " " + file
		}},
		{"directory 0777", false, func(t *testing.T, file, dir string) (string, string) {
			chmod(t, dir, 0o777)
			return dir, "chmod go-w " + dir
		}},
		{"directory 0775", false, func(t *testing.T, file, dir string) (string, string) {
			chmod(t, dir, 0o775)
			return dir, "chmod go-w " + dir
		}},
		{"directory of another user", true, func(t *testing.T, file, dir string) (string, string) {
			chown(t, dir)
			return dir, "chown " + uid() + " " + dir
		}},
		// Like /tmp: nobody else can rename or remove the user's file.
		{"own file in a sticky directory 1777", false, func(t *testing.T, file, dir string) (string, string) {
			chmod(t, dir, 0o1777)
			return "", ""
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("needs root to give a file to another user (CI runs as root)")
			}
			file := layout(t)
			dir := filepath.Dir(file)
			named, fix := c.spoil(t, file, dir)
			err := use(file)
			if named == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *errs.Error
			if !errs.Is(err, errs.PermissionDeny) || !errors.As(err, &e) {
				t.Fatalf("error %v (%s), want permission_denied", err, errs.CodeOf(err))
			}
			if !strings.Contains(e.Message, named) || !strings.Contains(e.Message, "refusing to use") {
				t.Errorf("message %q should refuse %s", e.Message, named)
			}
			if !strings.Contains(e.Hint, fix) {
				t.Errorf("hint %q should say %q", e.Hint, fix)
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	// os.Chmod takes the sticky bit as os.ModeSticky, not as 01000.
	m := mode & 0o777
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string) {
	t.Helper()
	if err := os.Chown(path, Nobody, Nobody); err != nil {
		t.Fatal(err)
	}
}

func uid() string { return strconv.Itoa(os.Getuid()) }

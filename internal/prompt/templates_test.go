package prompt

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/trust/trusttest"
)

// repoWith makes a repository whose templates file holds content.
func repoWith(t *testing.T, content string) string {
	t.Helper()
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, ".coordination-engine"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, RepoTemplatesFile), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

func TestLoadRepoTemplates(t *testing.T) {
	ts, ok, err := LoadRepoTemplates(t.TempDir())
	if ts != nil || ok || err != nil {
		t.Errorf("missing file: %v, %v, %v", ts, ok, err)
	}
	repo := repoWith(t, "# our order\n\nrun the tests;\r\n  # indented comment\n  fix the first failure;  \nstop.")
	ts, ok, err = LoadRepoTemplates(repo)
	if want := []string{"run the tests;", "fix the first failure;", "stop."}; !reflect.DeepEqual(ts, want) || !ok || err != nil {
		t.Errorf("got %q, %v, %v; want %q", ts, ok, err, want)
	}
}

func TestLoadRepoTemplatesRefusesBadFiles(t *testing.T) {
	eleven := strings.Repeat("do it;\n", 11)
	tests := []struct {
		name, content, want string
	}{
		{"too many", eleven, "line 11: more than 10 templates"},
		{"too long", "ok\n" + strings.Repeat("x", 513) + "\n", "line 2: it is 513 bytes long; the limit is 512"},
		{"bad UTF-8", "# c\nok\nbad \xff byte\n", "line 3: it is not valid UTF-8"},
		{"control", "esc \x1b[2J here\n", "line 1: it has the control or format character U+001B"},
		{"only comments", "# nothing\n\n", "no templates"},
		{"too large", strings.Repeat("#", 16*1024+1), "larger than 16384 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := repoWith(t, tt.content)
			ts, ok, err := LoadRepoTemplates(repo)
			if ts != nil || ok || !errs.Is(err, errs.ConfigInvalid) {
				t.Fatalf("got %q, %v, %v; want config_invalid", ts, ok, err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), filepath.Join(repo, RepoTemplatesFile)) {
				t.Errorf("error %q does not name the file and %q", err, tt.want)
			}
		})
	}
}

func TestLoadRepoTemplatesRefusesWhatIsNotARegularFile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "other.txt")
	if err := os.WriteFile(outside, []byte("a template\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setups := map[string]func(repo string) error{
		"symlink to a file":    func(repo string) error { return os.Symlink(outside, filepath.Join(repo, RepoTemplatesFile)) },
		"symlink to /dev/zero": func(repo string) error { return os.Symlink("/dev/zero", filepath.Join(repo, RepoTemplatesFile)) },
		"directory":            func(repo string) error { return os.Mkdir(filepath.Join(repo, RepoTemplatesFile), 0o755) },
		"fifo":                 func(repo string) error { return syscall.Mkfifo(filepath.Join(repo, RepoTemplatesFile), 0o644) },
	}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			repo := t.TempDir()
			if err := os.Mkdir(filepath.Join(repo, ".coordination-engine"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := setup(repo); err != nil {
				t.Fatal(err)
			}
			ts, ok, err := LoadRepoTemplates(repo)
			if ts != nil || ok || !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("got %q, %v, %v; want not a regular file", ts, ok, err)
			}
		})
	}
	t.Run("symlinked directory", func(t *testing.T) {
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "continuation.txt"), []byte("a template\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		repo := t.TempDir()
		if err := os.Symlink(other, filepath.Join(repo, ".coordination-engine")); err != nil {
			t.Fatal(err)
		}
		ts, ok, err := LoadRepoTemplates(repo)
		if ts != nil || ok || !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "is not a directory") {
			t.Errorf("got %q, %v, %v; want not a directory", ts, ok, err)
		}
	})
}

func TestCheckTemplates(t *testing.T) {
	for _, ok := range [][]string{nil, {}, {"one"}, Templates} {
		if err := CheckTemplates(ok); err != nil {
			t.Errorf("CheckTemplates(%q) = %v", ok, err)
		}
	}
	bad := map[string][]string{
		"11 templates; the limit is 10":                                       strings.Split(strings.Repeat("t,", 11)[:21], ","),
		"template 2: it is empty":                                             {"a", " "},
		"template 1: it has the control or format character U+000A at byte 3": {"two\nlines"},
		"template 1: it is 513 bytes long; the limit is 512":                  {strings.Repeat("x", 513)},
		"template 1: it is not valid UTF-8":                                   {"\xff"},
	}
	for want, ts := range bad {
		err := CheckTemplates(ts)
		if !errs.Is(err, errs.ConfigInvalid) || err.Error() != want {
			t.Errorf("CheckTemplates(%q) = %v, want %q", ts, err, want)
		}
	}
}

// The templates go into an agent's prompt: a file, or a directory, that
// another user can write is refused, and the engine uses the configured
// or built-in templates instead.
func TestLoadRepoTemplatesRefusesWhatOthersCanWrite(t *testing.T) {
	layout := func(t *testing.T) string {
		return filepath.Join(repoWith(t, "a template\n"), RepoTemplatesFile)
	}
	trusttest.Run(t, layout, func(file string) error {
		ts, found, err := LoadRepoTemplates(filepath.Dir(filepath.Dir(file)))
		if err == nil && (!found || !reflect.DeepEqual(ts, []string{"a template"})) {
			t.Errorf("accepted as %q, %v", ts, found)
		}
		return err
	})
}

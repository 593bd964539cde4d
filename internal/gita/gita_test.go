package gita

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/trust/trusttest"
)

func TestDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"project home wins", map[string]string{"GITA_PROJECT_HOME": "/p", "XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/p/gita"},
		{"xdg", map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/gita"},
		{"home", map[string]string{"HOME": "/h"}, "/h/.config/gita"},
		{"empty counts as unset", map[string]string{"GITA_PROJECT_HOME": "", "XDG_CONFIG_HOME": "", "HOME": "/h"}, "/h/.config/gita"},
		{"trailing slash", map[string]string{"GITA_PROJECT_HOME": "/p/"}, "/p/gita"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Dir(func(k string) string { return tt.env[k] })
			if err != nil || got != tt.want {
				t.Fatalf("Dir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}

	t.Run("no home", func(t *testing.T) {
		t.Parallel()
		_, err := Dir(func(string) string { return "" })
		if !errs.Is(err, errs.RegistryError) || !strings.Contains(err.Error(), "HOME") {
			t.Fatalf("Dir with nothing set: %v, want a registry_error naming HOME", err)
		}
	})
}

// setup makes an empty gita directory and a directory to put repositories in.
func setup(t testing.TB) (gitaDir, src string) {
	t.Helper()
	root := t.TempDir()
	gitaDir = filepath.Join(root, "gita")
	src = filepath.Join(root, "src")
	for _, d := range []string{gitaDir, src} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return gitaDir, src
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = append(gitEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fakeRepo makes a directory that gita takes for a repository: one with a .git
// directory in it.
func fakeRepo(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(path, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustLoad(t *testing.T, rd *Reader) *Registry {
	t.Helper()
	reg, err := rd.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return reg
}

func names(repos []Repo) []string {
	var out []string
	for _, r := range repos {
		out = append(out, r.Name)
	}
	return out
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir, src := setup(t)

	plain := filepath.Join(src, "net-kingdom")
	git(t, "init", "-q", plain)
	git(t, "-C", plain, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "init")
	worktree := filepath.Join(src, "net-kingdom-wt")
	git(t, "-C", plain, "worktree", "add", "-q", worktree)
	if fi, err := os.Stat(filepath.Join(worktree, ".git")); err != nil || fi.IsDir() {
		t.Fatalf("worktree .git should be a file: %v", err)
	}
	bare := filepath.Join(src, "bare.git")
	git(t, "init", "-q", "--bare", bare)
	fakeRepo(t, filepath.Join(src, "with space,comma"))
	fakeRepo(t, filepath.Join(src, "with space"))
	fakeRepo(t, filepath.Join(src, `say "hi"`))
	fakeRepo(t, filepath.Join(src, "old"))
	notGit := filepath.Join(src, "not-git")
	if err := os.Mkdir(notGit, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(src, "a-file")
	writeFile(t, file, "")

	// Written the way Python's csv writer writes these rows (see the top of
	// this file), plus a blank line and an older two-column row.
	repos := fmt.Sprintf("%[1]s/net-kingdom,net-kingdom,,\r\n"+ // 1
		"\"%[1]s/with space,comma\",\"with space,comma\",,\r\n"+ // 2
		"%[1]s/with space,with space,,-c core.quotepath=off\r\n"+ // 3
		"\"%[1]s/say \"\"hi\"\"\",\"say \"\"hi\"\"\",,\r\n"+ // 4
		"%[1]s/net-kingdom-wt,net-kingdom-wt,,\r\n"+ // 5
		"%[1]s/bare.git,bare,,\r\n"+ // 6
		"%[1]s/not-git,not-git,,\r\n"+ // 7
		"\r\n"+ // 8
		"%[1]s/gone,gone,,\r\n"+ // 9
		"relative/x,relative,,\r\n"+ // 10
		"%[1]s/a-file,a-file,,\r\n"+ // 11
		"%[1]s/old,old\r\n", // 12
		src)
	writeFile(t, filepath.Join(dir, ReposFileName), repos)
	writeFile(t, filepath.Join(dir, GroupsFileName), "core:net-kingdom bare:\r\nsrc:old gone:"+src+"\r\n")

	reg := mustLoad(t, NewReader(dir))

	if reg.Dir != dir || reg.ReposFile != filepath.Join(dir, "repos.csv") || reg.GroupsFile != filepath.Join(dir, "groups.csv") {
		t.Errorf("files = %q %q %q", reg.Dir, reg.ReposFile, reg.GroupsFile)
	}
	wantNames := []string{"net-kingdom", "with space,comma", "with space", `say "hi"`, "net-kingdom-wt", "bare", "old"}
	if got := names(reg.Repos); !slices.Equal(got, wantNames) {
		t.Errorf("registered = %q\nwant %q", got, wantNames)
	}
	wantPaths := map[string]string{
		"net-kingdom":      plain,
		"with space,comma": filepath.Join(src, "with space,comma"),
		`say "hi"`:         filepath.Join(src, `say "hi"`),
		"net-kingdom-wt":   worktree,
		"bare":             bare,
	}
	for name, path := range wantPaths {
		repo, ok := reg.Lookup(name)
		if !ok || repo.Path != path {
			t.Errorf("Lookup(%q) = %+v, %v; want path %q", name, repo, ok, path)
		}
	}
	if repo, _ := reg.Lookup("bare"); !repo.Bare {
		t.Errorf("bare repo not marked Bare: %+v", repo)
	}
	if repo, _ := reg.Lookup("net-kingdom"); repo.Bare {
		t.Errorf("work tree marked Bare: %+v", repo)
	}
	if repo, _ := reg.Lookup("with space"); repo.RawFlags != "-c core.quotepath=off" || !slices.Equal(repo.Flags, []string{"-c", "core.quotepath=off"}) {
		t.Errorf("flags = %q %q", repo.RawFlags, repo.Flags)
	}

	type unreg struct {
		name   string
		line   int
		reason string
	}
	var gotUnreg []unreg
	for _, u := range reg.Unregistered {
		gotUnreg = append(gotUnreg, unreg{u.Repo.Name, u.Line, u.Reason})
	}
	wantUnreg := []unreg{
		{"not-git", 7, "no .git and not a bare repository"},
		{"gone", 9, "path does not exist"},
		{"relative", 10, "path is not absolute"},
		{"a-file", 11, "path is not a directory"},
	}
	if !reflect.DeepEqual(gotUnreg, wantUnreg) {
		t.Errorf("unregistered = %+v\nwant %+v", gotUnreg, wantUnreg)
	}
	for _, u := range wantUnreg {
		if _, ok := reg.Lookup(u.name); ok {
			t.Errorf("Lookup(%q) found an unregistered row", u.name)
		}
	}
	for _, name := range []string{"Net-Kingdom", "net-kingdom ", " net-kingdom", "with space, comma"} {
		if _, ok := reg.Lookup(name); ok {
			t.Errorf("Lookup(%q) should need the exact name", name)
		}
	}

	wantSlugs := slices.Clone(wantNames)
	slices.Sort(wantSlugs)
	if got := reg.Slugs(); !slices.Equal(got, wantSlugs) {
		t.Errorf("Slugs = %q, want %q", got, wantSlugs)
	}

	wantGroups := []Group{
		{Name: "core", Repos: []string{"net-kingdom", "bare"}},
		{Name: "src", Repos: []string{"old", "gone"}, Path: src},
	}
	if !reflect.DeepEqual(reg.Groups, wantGroups) {
		t.Errorf("groups = %+v\nwant %+v", reg.Groups, wantGroups)
	}
}

func TestLoadWithoutGroups(t *testing.T) {
	t.Parallel()
	dir, src := setup(t)
	fakeRepo(t, filepath.Join(src, "a"))
	writeFile(t, filepath.Join(dir, ReposFileName), src+"/a,a,,\r\n")
	reg := mustLoad(t, NewReader(dir))
	if len(reg.Groups) != 0 || !slices.Equal(names(reg.Repos), []string{"a"}) {
		t.Fatalf("got repos %q groups %+v", names(reg.Repos), reg.Groups)
	}
}

func TestLoadEmptyRegistry(t *testing.T) {
	t.Parallel()
	// gita leaves an empty repos.csv behind after `gita rm` of the last repo.
	for _, data := range []string{"", "\r\n"} {
		dir, _ := setup(t)
		writeFile(t, filepath.Join(dir, ReposFileName), data)
		writeFile(t, filepath.Join(dir, GroupsFileName), "")
		reg := mustLoad(t, NewReader(dir))
		if len(reg.Repos)+len(reg.Unregistered)+len(reg.Groups) != 0 {
			t.Fatalf("registry from %q = %+v, want empty", data, reg)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// prepare lays out the registry in dir (which does not exist yet) and
		// returns the message wanted.
		prepare  func(t *testing.T, dir string) string
		wantHint string
	}{
		{"missing directory", func(t *testing.T, dir string) string {
			return "gita registry directory " + dir + " does not exist"
		}, "gita add"},
		{"missing repos.csv", func(t *testing.T, dir string) string {
			mkdir(t, dir)
			writeFile(t, filepath.Join(dir, GroupsFileName), "")
			return "gita registry " + filepath.Join(dir, ReposFileName) + " does not exist"
		}, "gita add"},
		{"registry directory is a file", func(t *testing.T, dir string) string {
			writeFile(t, dir, "")
			return "cannot read gita registry " + filepath.Join(dir, ReposFileName) + ": not a directory"
		}, "readable"},
		// A directory in place of the file is unreadable even for root, which
		// chmod 000 is not.
		{"unreadable repos.csv", func(t *testing.T, dir string) string {
			mkdir(t, filepath.Join(dir, ReposFileName))
			return "cannot read gita registry " + filepath.Join(dir, ReposFileName) + ": is a directory"
		}, "readable"},
		{"unreadable groups.csv", func(t *testing.T, dir string) string {
			mkdir(t, dir)
			writeFile(t, filepath.Join(dir, ReposFileName), "")
			mkdir(t, filepath.Join(dir, GroupsFileName))
			return "cannot read gita registry " + filepath.Join(dir, GroupsFileName) + ": is a directory"
		}, "readable"},
		{"malformed repos.csv", func(t *testing.T, dir string) string {
			mkdir(t, dir)
			writeFile(t, filepath.Join(dir, ReposFileName), "/a,a,,\r\n/b,b,,\r\n/c\r\n/d,d,,\r\n")
			return filepath.Join(dir, ReposFileName) + ":3: row has 1 field, want path,name[,type,flags]"
		}, "line 3"},
		{"hostile name in repos.csv", func(t *testing.T, dir string) string {
			mkdir(t, dir)
			writeFile(t, filepath.Join(dir, ReposFileName), "/a,a,,\r\n/b,\"b\x1b]52;c;aGk=\x07\",,\r\n")
			return filepath.Join(dir, ReposFileName) + `:2: name 'b\x1b]52;c;aGk=\x07' cannot be used: it has the control or format character U+001B at byte 1`
		}, "line 2"},
		{"malformed groups.csv", func(t *testing.T, dir string) string {
			mkdir(t, dir)
			writeFile(t, filepath.Join(dir, ReposFileName), "")
			writeFile(t, filepath.Join(dir, GroupsFileName), "a:x:\r\n:y:\r\n")
			return filepath.Join(dir, GroupsFileName) + ":2: empty group name"
		}, "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "gita")
			want := tt.prepare(t, dir)
			reg, err := NewReader(dir).Load()
			if err == nil {
				t.Fatalf("Load = %+v, want error %q", reg, want)
			}
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != errs.RegistryError || e.Message != want {
				t.Fatalf("Load error\n got %q (%s)\nwant %q", err, errs.CodeOf(err), want)
			}
			if !strings.Contains(e.Hint, tt.wantHint) {
				t.Errorf("hint %q should mention %q", e.Hint, tt.wantHint)
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// The registry says which directory is which repo, and so where tamq types:
// repos.csv and groups.csv that another user can write, or replace, are
// refused.
func TestLoadRefusesARegistryOthersCanWrite(t *testing.T) {
	t.Parallel()
	for _, name := range []string{ReposFileName, GroupsFileName} {
		t.Run(name, func(t *testing.T) {
			layout := func(t *testing.T) string {
				dir, src := setup(t)
				fakeRepo(t, filepath.Join(src, "a"))
				writeFile(t, filepath.Join(dir, ReposFileName), src+"/a,a,,\r\n")
				writeFile(t, filepath.Join(dir, GroupsFileName), "g:a:\r\n")
				return filepath.Join(dir, name)
			}
			trusttest.Run(t, layout, func(file string) error {
				reg, err := NewReader(filepath.Dir(file)).Load()
				if err == nil && (len(reg.Repos) != 1 || len(reg.Groups) != 1) {
					t.Errorf("accepted as %+v", reg)
				}
				// Watched refuses what Load refuses.
				wreg, werr := NewReader(filepath.Dir(file)).Watched()
				if (err == nil) != (werr == nil) || errs.CodeOf(err) != errs.CodeOf(werr) {
					t.Errorf("Load says %v, Watched %v", err, werr)
				}
				if werr == nil && (len(wreg.Repos) != 1 || len(wreg.Groups) != 1) {
					t.Errorf("Watched accepted it as %+v", wreg)
				}
				return err
			})
		})
	}
}

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
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/trust/trusttest"
)

// The files in testdata were written by Python 3.11's csv module exactly as
// gita 0.16's utils.write_to_repo_file and write_to_groups_file call it:
//
//	csv.writer(f, delimiter=",", quotechar='"', quoting=csv.QUOTE_MINIMAL).writerows(rows)
//
// with the file opened with newline="" (so CRLF line ends), and ':' as the
// delimiter for groups.csv. The two-column files are what older gita wrote.
// Note that QUOTE_MINIMAL quotes a field only for a delimiter, a quote or a
// line break: "with space" alone is not quoted.

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

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseRepos(t *testing.T) {
	t.Parallel()
	r := func(line int, path, name, typ, flags string) row {
		return row{line: line, repo: Repo{Path: path, Name: name, Type: typ, RawFlags: flags, Flags: strings.Fields(flags)}}
	}
	tests := []struct {
		name string
		data string
		want []row
	}{
		{"python-written four columns", string(readTestdata(t, "repos.csv")), []row{
			r(1, "/home/u/src/net-kingdom", "net-kingdom", "", ""),
			r(2, "/home/u/src/with space,comma", "with space,comma", "", ""),
			r(3, "/home/u/src/with space", "with space", "", ""),
			r(4, `/home/u/src/say "hi"`, `say "hi"`, "", ""),
			r(5, "/home/u/src/flagged", "flagged", "", "--git-dir=/home/u/src/flagged/.git --work-tree=/home/u/src/flagged"),
			r(6, "/home/u/other/net-kingdom", "other/net-kingdom", "", ""),
		}},
		{"python-written two columns", string(readTestdata(t, "repos-two-column.csv")), []row{
			r(1, "/home/u/src/net-kingdom", "net-kingdom", "", ""),
			r(2, "/home/u/src/with space,comma", "with space,comma", "", ""),
		}},
		{"mixed column counts", "/a,a\r\n/b,b,,\r\n/c,c,m\r\n/d,d,,-c x\r\n", []row{
			r(1, "/a", "a", "", ""), r(2, "/b", "b", "", ""), r(3, "/c", "c", "m", ""), r(4, "/d", "d", "", "-c x"),
		}},
		{"blank lines are skipped but counted", "\r\n/a,a,,\r\n\r\n\r\n/b,b,,\r\n\r\n", []row{
			r(2, "/a", "a", "", ""), r(5, "/b", "b", "", ""),
		}},
		{"LF line ends", "/a,a,,\n\n/b,b\n", []row{r(1, "/a", "a", "", ""), r(3, "/b", "b", "", "")}},
		{"no final line end", "/a,a,,\r\n/b,b,,", []row{r(1, "/a", "a", "", ""), r(2, "/b", "b", "", "")}},
		{"needless quotes", "\"/s/a b\",\"a b\",\"\",\"\"\r\n", []row{r(1, "/s/a b", "a b", "", "")}},
		{"spaces are kept", "/p, lead ,,\r\n", []row{r(1, "/p", " lead ", "", "")}},
		{"flags split on runs of spaces", "/a,a,,  -c   x  \r\n", []row{r(1, "/a", "a", "", "  -c   x  ")}},
		// Only in the type column, unused: a name or path may not hold one.
		{"quoted line break moves later line numbers", "/a,a,\"x\r\ny\",\r\n/c,c,,\r\n", []row{
			r(1, "/a", "a", "x\ny", ""), r(3, "/c", "c", "", ""),
		}},
		{"empty file", "", nil},
		{"only blank lines", "\r\n\r\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseRepos("/x/gita/repos.csv", []byte(tt.data))
			if err != nil {
				t.Fatalf("parseRepos: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseRepos(%q)\n got %+v\nwant %+v", tt.data, got, tt.want)
			}
		})
	}
}

func TestParseReposErrors(t *testing.T) {
	t.Parallel()
	const file = "/x/gita/repos.csv"
	tests := []struct {
		name, data, want string
	}{
		{"unterminated quote", "/a,a,,\r\n\"/b,b,,\r\n/c,c,,\r\n", file + `:2: quoted field not closed, or text after its closing "`},
		{"text after closing quote", "/a,a,,\r\n/b,\"b\"x,,\r\n", file + `:2: quoted field not closed, or text after its closing "`},
		{"bare quote", "/a,a,,\r\n/b,b\"c,,\r\n", file + `:2: " inside an unquoted field (quote the field and double the ")`},
		{"empty name", "/a,a,,\r\n/b,,,\r\n", file + ":2: empty name"},
		{"empty path", "/a,a,,\r\n,b,,\r\n", file + ":2: empty path"},
		{"path only", "/a,a,,\r\n\r\n/b\r\n", file + ":3: row has 1 field, want path,name[,type,flags]"},
		{"blank-looking line", "/a,a,,\n   \n", file + ":2: row has 1 field, want path,name[,type,flags]"},
		{"too many fields", "/a,a,,,x\r\n", file + ":1: row has 5 fields, want path,name[,type,flags]"},
		{"duplicate name", "/a,a,,\r\n/b,b,,\r\n/c,a,,\r\n", file + ":3: duplicate name 'a' (first on line 1)"},
		{"names are case-sensitive, duplicates exact", "/a,a,,\r\n/b,A,,\r\n/c,A,,\r\n", file + ":3: duplicate name 'A' (first on line 2)"},
		// A name is typed into agents' terminals and printed by every command:
		// nothing in it may act there, and the message shows it escaped.
		{"OSC 52 in a name", "/a,a,,\r\n/b,\"evil\x1b]52;c;aGk=\x07\",,\r\n", file + `:2: name 'evil\x1b]52;c;aGk=\x07' cannot be used: it has the control or format character U+001B at byte 4`},
		{"end of bracketed paste in a name", "/a,evil\x1b[201~,,\r\n", file + `:1: name 'evil\x1b[201~' cannot be used: it has the control or format character U+001B at byte 4`},
		{"bidi override in a name", "/a,a,,\r\n/b,txt\u202egnp.exe,,\r\n", file + `:2: name 'txt\u202egnp.exe' cannot be used: it has the control or format character U+202E at byte 3`},
		{"BEL in a name", "/a,ding\a,,\r\n", file + `:1: name 'ding\x07' cannot be used: it has the control or format character U+0007 at byte 4`},
		{"C1 CSI in a name", "/a,c1\u009b31m,,\r\n", file + `:1: name 'c1\x9b31m' cannot be used: it has the control or format character U+009B at byte 2`},
		{"line break in a quoted name", "/a,\"two\nlines\",,\r\n", file + `:1: name 'two\x0alines' cannot be used: it has the control or format character U+000A at byte 3`},
		{"invalid UTF-8 in a name", "/a,bad\xff,,\r\n", file + `:1: name 'bad\xff' cannot be used: it is not valid UTF-8`},
		{"name too long", "/a," + strings.Repeat("n", 300) + ",,\r\n", file + ":1: name '" + strings.Repeat("n", 300) + "' cannot be used: it is 300 bytes long; the limit is 256"},
		{"escape in a path", "/a,a,,\r\n/src/\x1b[2J,b,,\r\n", file + `:2: path '/src/\x1b[2J' cannot be used: it has the control or format character U+001B at byte 5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rows, err := parseRepos(file, []byte(tt.data))
			if err == nil {
				t.Fatalf("parseRepos(%q) = %+v, want error %q", tt.data, rows, tt.want)
			}
			if !errs.Is(err, errs.RegistryError) || err.Error() != tt.want {
				t.Fatalf("parseRepos(%q) error\n got %q (%s)\nwant %q", tt.data, err, errs.CodeOf(err), tt.want)
			}
		})
	}
}

func TestParseGroups(t *testing.T) {
	t.Parallel()
	const file = "/x/gita/groups.csv"
	tests := []struct {
		name    string
		data    string
		want    []Group
		wantErr string
	}{
		{name: "python-written with path", data: string(readTestdata(t, "groups.csv")), want: []Group{
			{Name: "core", Repos: []string{"net-kingdom", "railiance-platform"}},
			{Name: "src", Repos: []string{"flagged", "net-kingdom"}, Path: "/home/u/src"},
			{Name: "colon", Repos: []string{"flagged"}, Path: "/mnt/a:b"},
		}},
		{name: "python-written two columns", data: string(readTestdata(t, "groups-two-column.csv")), want: []Group{
			{Name: "core", Repos: []string{"net-kingdom", "railiance-platform"}},
			{Name: "solo", Repos: []string{"flagged"}},
		}},
		{name: "group without repos", data: "empty\r\n", want: []Group{{Name: "empty", Repos: []string{}}}},
		{name: "LF and blank lines", data: "\na:x y\n\nb:z:/p\n", want: []Group{
			{Name: "a", Repos: []string{"x", "y"}}, {Name: "b", Repos: []string{"z"}, Path: "/p"},
		}},
		{name: "empty", data: ""},
		{name: "too many fields", data: "a:x:/p\r\nb:y:/p:q\r\n", wantErr: file + ":2: row has 4 fields, want name:repos[:path]"},
		{name: "empty name", data: ":x:\r\n", wantErr: file + ":1: empty group name"},
		{name: "duplicate", data: "a:x:\r\nb:y:\r\na:z:\r\n", wantErr: file + ":3: duplicate group 'a' (first on line 1)"},
		{name: "unterminated quote", data: "a:x:\r\nb:y:\"/p\r\n", wantErr: file + `:2: quoted field not closed, or text after its closing "`},
		{name: "escape in a group name", data: "a:x:\r\nevil\x1b]0;t\x07:y:\r\n", wantErr: file + `:2: group name 'evil\x1b]0;t\x07' cannot be used: it has the control or format character U+001B at byte 4`},
		{name: "bidi in a member", data: "a:x y\u202e:\r\n", wantErr: file + `:1: repo name 'y\u202e' in group 'a' cannot be used: it has the control or format character U+202E at byte 1`},
		{name: "escape in a group path", data: "a:x:/p\x1b[201~\r\n", wantErr: file + `:1: group path '/p\x1b[201~' cannot be used: it has the control or format character U+001B at byte 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseGroups(file, []byte(tt.data))
			if tt.wantErr != "" {
				if !errs.Is(err, errs.RegistryError) || err.Error() != tt.wantErr {
					t.Fatalf("parseGroups(%q) = %+v, %v; want error %q", tt.data, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseGroups: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseGroups(%q)\n got %+v\nwant %+v", tt.data, got, tt.want)
			}
		})
	}
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

func TestLoadSeesRewrites(t *testing.T) {
	t.Parallel()
	dir, src := setup(t)
	fakeRepo(t, filepath.Join(src, "alpha"))
	fakeRepo(t, filepath.Join(src, "bravo"))
	reposFile := filepath.Join(dir, ReposFileName)
	rd := NewReader(dir)

	writeFile(t, reposFile, src+"/alpha,alpha,,\r\n"+src+"/bravo,bravo,,\r\n")
	first := mustLoad(t, rd)
	if got := names(first.Repos); !slices.Equal(got, []string{"alpha", "bravo"}) {
		t.Fatalf("first load = %q", got)
	}
	before, err := os.Stat(reposFile)
	if err != nil {
		t.Fatal(err)
	}

	// `gita rename alpha alphx`: same size, and the old mtime put back, as a
	// file system with coarse timestamps would show it.
	writeFile(t, reposFile, src+"/alpha,alphx,,\r\n"+src+"/bravo,bravo,,\r\n")
	if err := os.Chtimes(reposFile, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(reposFile); after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("rewrite should keep size and mtime")
	}
	second := mustLoad(t, rd)
	if got := names(second.Repos); !slices.Equal(got, []string{"alphx", "bravo"}) {
		t.Fatalf("after same-size rename = %q", got)
	}
	if got := names(first.Repos); !slices.Equal(got, []string{"alpha", "bravo"}) {
		t.Fatalf("an earlier Registry changed: %q", got)
	}

	writeFile(t, reposFile, src+"/alpha,alphx,,\r\n"+src+"/bravo,bravo,,\r\n/nowhere,c")
	third := mustLoad(t, rd)
	if len(third.Unregistered) != 1 || third.Unregistered[0].Repo.Name != "c" {
		t.Fatalf("appended row not seen: %+v", third.Unregistered)
	}

	writeFile(t, reposFile, src+"/alpha,alphx,,\r\n\"broken\r\n")
	if _, err := rd.Load(); !errs.Is(err, errs.RegistryError) {
		t.Fatalf("broken file: %v, want registry_error", err)
	}
	writeFile(t, reposFile, src+"/bravo,bravo,,\r\n")
	if got := names(mustLoad(t, rd).Repos); !slices.Equal(got, []string{"bravo"}) {
		t.Fatalf("after repair = %q", got)
	}

	writeFile(t, filepath.Join(dir, GroupsFileName), "g:bravo:\r\n")
	if got := mustLoad(t, rd).Groups; len(got) != 1 || got[0].Name != "g" {
		t.Fatalf("new groups.csv not seen: %+v", got)
	}
	writeFile(t, filepath.Join(dir, GroupsFileName), "h:bravo:\r\n")
	if got := mustLoad(t, rd).Groups; len(got) != 1 || got[0].Name != "h" {
		t.Fatalf("same-size groups.csv rewrite not seen: %+v", got)
	}
	if err := os.Remove(filepath.Join(dir, GroupsFileName)); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, rd).Groups; len(got) != 0 {
		t.Fatalf("removed groups.csv still seen: %+v", got)
	}
}

func TestLoadSeesDeletedRepo(t *testing.T) {
	t.Parallel()
	dir, src := setup(t)
	repo := filepath.Join(src, "a")
	git(t, "init", "-q", repo)
	writeFile(t, filepath.Join(dir, ReposFileName), repo+",a,,\r\n")
	rd := NewReader(dir)

	if _, ok := mustLoad(t, rd).Lookup("a"); !ok {
		t.Fatal("a not registered")
	}

	if err := os.RemoveAll(filepath.Join(repo, ".git")); err != nil {
		t.Fatal(err)
	}
	reg := mustLoad(t, rd)
	if _, ok := reg.Lookup("a"); ok || len(reg.Unregistered) != 1 || reg.Unregistered[0].Reason != "no .git and not a bare repository" {
		t.Fatalf("after removing .git: repos %q unregistered %+v", names(reg.Repos), reg.Unregistered)
	}

	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	reg = mustLoad(t, rd)
	if _, ok := reg.Lookup("a"); ok || len(reg.Unregistered) != 1 || reg.Unregistered[0].Reason != "path does not exist" {
		t.Fatalf("after removing the repo: repos %q unregistered %+v", names(reg.Repos), reg.Unregistered)
	}

	git(t, "init", "-q", repo)
	if _, ok := mustLoad(t, rd).Lookup("a"); !ok {
		t.Fatal("re-created repo not registered")
	}
}

func TestLoadConcurrent(t *testing.T) {
	t.Parallel()
	dir, src := setup(t)
	var csv strings.Builder
	for i := range 20 {
		name := fmt.Sprintf("r%02d", i)
		fakeRepo(t, filepath.Join(src, name))
		fmt.Fprintf(&csv, "%s/%s,%s,,-c x=%d\r\n", src, name, name, i)
	}
	writeFile(t, filepath.Join(dir, ReposFileName), csv.String())
	writeFile(t, filepath.Join(dir, GroupsFileName), "g:r00 r01:\r\n")
	rd := NewReader(dir)

	var wg sync.WaitGroup
	regs := make([]*Registry, 8)
	errors := make([]error, len(regs))
	for i := range regs {
		wg.Go(func() {
			for range 5 {
				regs[i], errors[i] = rd.Load()
				if errors[i] != nil {
					return
				}
				// Callers own what they get: this must not show up elsewhere.
				regs[i].Repos[0].Flags[0] = "changed"
				regs[i].Groups[0].Repos[0] = "changed"
			}
		})
	}
	wg.Wait()
	for i, reg := range regs {
		if errors[i] != nil {
			t.Fatal(errors[i])
		}
		if len(reg.Repos) != 20 {
			t.Fatalf("load %d: %d repos", i, len(reg.Repos))
		}
	}
	reg := mustLoad(t, rd)
	if reg.Repos[0].Flags[0] != "-c" || reg.Groups[0].Repos[0] != "r00" {
		t.Fatalf("a caller's change leaked into the cache: %q %q", reg.Repos[0].Flags, reg.Groups[0].Repos)
	}
}

func testRegistry(slugs ...string) *Registry {
	reg := &Registry{Dir: "/x/gita", ReposFile: "/x/gita/repos.csv", GroupsFile: "/x/gita/groups.csv"}
	for _, s := range slugs {
		reg.Repos = append(reg.Repos, Repo{Name: s, Path: "/src/" + s})
	}
	return reg
}

func TestNear(t *testing.T) {
	t.Parallel()
	reg := testRegistry("net-kingdom", "railiance-platform", "Net-Tools", "with space,comma", "api", "apx")
	tests := []struct {
		slug string
		max  int
		want []string
	}{
		{"Net-Kingdom", 3, []string{"net-kingdom"}},
		{"NET-TOOLS", 3, []string{"Net-Tools"}},
		{"net", 3, []string{"Net-Tools", "net-kingdom"}},
		{"net-kingdon", 3, []string{"net-kingdom"}},
		{"net-kigndom", 3, []string{"net-kingdom"}},
		{"railiance", 3, []string{"railiance-platform"}},
		{"platform", 3, []string{"railiance-platform"}},
		{"with space", 3, []string{"with space,comma"}},
		{"apy", 3, []string{"api", "apx"}},
		{"ap", 1, []string{"api"}},
		{"zzz", 3, nil},
		{"", 3, nil},
		{"x", 3, nil}, // too short to suggest "apx" just for containing it
		{"net", 0, nil},
	}
	for _, tt := range tests {
		if got := reg.Near(tt.slug, tt.max); !slices.Equal(got, tt.want) {
			t.Errorf("Near(%q, %d) = %q, want %q", tt.slug, tt.max, got, tt.want)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	reg := testRegistry("net-kingdom", "api", "apx", "with space,comma")
	reg.Unregistered = []Unregistered{{Repo: Repo{Name: "gone", Path: "/src/gone"}, Line: 4, Reason: "path does not exist"}}
	many := testRegistry("net-a", "net-b", "net-c", "net-d")

	if repo, err := reg.Resolve("with space,comma"); err != nil || repo.Path != "/src/with space,comma" {
		t.Fatalf("Resolve(registered) = %+v, %v", repo, err)
	}
	tests := []struct {
		reg      *Registry
		slug     string
		want     string
		wantHint string
	}{
		{reg, "zzz", "unknown target 'zzz': not in the gita registry (see `gita ls`)", "gita add"},
		{reg, "net-kingdon", "unknown target 'net-kingdon': not in the gita registry (see `gita ls`); did you mean 'net-kingdom'?", "gita add"},
		{reg, "NET-KINGDOM", "unknown target 'NET-KINGDOM': not in the gita registry (see `gita ls`); did you mean 'net-kingdom'?", "gita add"},
		{reg, "ap", "unknown target 'ap': not in the gita registry (see `gita ls`); did you mean 'api' or 'apx'?", "gita add"},
		{many, "net", "unknown target 'net': not in the gita registry (see `gita ls`); did you mean 'net-a', 'net-b' or 'net-c'?", "gita add"},
		{reg, "gone", "unknown target 'gone': its gita registry entry points to /src/gone, which is not a git repository (path does not exist)",
			"line 4 of /x/gita/repos.csv"},
	}
	for _, tt := range tests {
		_, err := tt.reg.Resolve(tt.slug)
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.UnknownTarget || e.Message != tt.want {
			t.Errorf("Resolve(%q) error\n got %q (%s)\nwant %q", tt.slug, err, errs.CodeOf(err), tt.want)
			continue
		}
		if !strings.Contains(e.Hint, tt.wantHint) {
			t.Errorf("Resolve(%q) hint %q should mention %q", tt.slug, e.Hint, tt.wantHint)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "abc", 0}, {"abc", "abd", 1},
		{"abc", "acb", 1}, {"kitten", "sitting", 3}, {"héllo", "hello", 1},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// Whether a directory without .git is a bare repository is git's to say, a
// process start: the service loads the registry for every message, so the
// answer is kept for as long as the directory stays as it was.
func TestBareRepositoryIsAskedOnceWhileUnchanged(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "gita")
	bare := filepath.Join(root, "src", "bare.git")
	git(t, "init", "-q", "--bare", bare)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ReposFileName), bare+",bare,,\r\n")
	rd := NewReader(dir)
	asked := 0
	rd.isBare = func(path string) (bool, string) { asked++; return isBare(path) }
	later := time.Now().Add(time.Hour) // past the racy window of every change below
	rd.now = func() time.Time { return later }
	for range 3 {
		reg, err := rd.Load()
		if err != nil {
			t.Fatal(err)
		}
		if repo, ok := reg.Lookup("bare"); !ok || !repo.Bare {
			t.Fatalf("bare repository not found bare: %+v", reg)
		}
	}
	if asked != 1 {
		t.Errorf("git asked %d times for an unchanged directory, want 1", asked)
	}
	// The directory changes (its HEAD goes): git is asked again, and says no.
	if err := os.Remove(filepath.Join(bare, "HEAD")); err != nil {
		t.Fatal(err)
	}
	reg, err := rd.Load()
	if err != nil {
		t.Fatal(err)
	}
	if asked != 2 || len(reg.Unregistered) != 1 || reg.Unregistered[0].Reason != "no .git and not a bare repository" {
		t.Errorf("after HEAD went: asked %d times, unregistered %+v", asked, reg.Unregistered)
	}
	// Within the racy window of the directory's last change, git is asked
	// every time: a change in the same clock tick would not show.
	rd.now = time.Now
	for range 2 {
		if _, err := rd.Load(); err != nil {
			t.Fatal(err)
		}
	}
	if asked != 4 {
		t.Errorf("git asked %d times in all, want 4 (twice within the racy window)", asked)
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

// Watched keeps its reading while the registry files stay as they were, so
// a send stats no registered path: a change of repos.csv (gita add, gita rm)
// is seen by the next call, a file others can write is refused at the next
// call, and a repository deleted behind gita's back is seen once
// recheckEvery has passed.
func TestWatchedFollowsTheRegistryFile(t *testing.T) {
	t.Parallel()
	dir, src := setup(t)
	a, b := filepath.Join(src, "a"), filepath.Join(src, "b")
	fakeRepo(t, a)
	fakeRepo(t, b)
	reposFile := filepath.Join(dir, ReposFileName)
	writeFile(t, reposFile, a+",a,,\r\n")
	var mu sync.Mutex
	now := time.Now()
	rd := NewReader(dir)
	rd.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	watched := func() *Registry {
		t.Helper()
		reg, err := rd.Watched()
		if err != nil {
			t.Fatalf("Watched: %v", err)
		}
		return reg
	}

	first := watched()
	if got := names(first.Repos); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("first = %q", got)
	}
	if again := watched(); again != first {
		t.Errorf("an unchanged registry was read and checked again")
	}

	// gita add b: seen at once.
	writeFile(t, reposFile, a+",a,,\r\n"+b+",b,,\r\n")
	if got := names(watched().Repos); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after adding b = %q", got)
	}

	// b deleted without gita knowing: the reading stands until recheckEvery.
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	if got := names(watched().Repos); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("checked again before recheckEvery: %q", got)
	}
	advance(recheckEvery)
	reg := watched()
	if got := names(reg.Repos); !slices.Equal(got, []string{"a"}) || len(reg.Unregistered) != 1 || reg.Unregistered[0].Reason != "path does not exist" {
		t.Fatalf("after recheckEvery: repos %q unregistered %+v", names(reg.Repos), reg.Unregistered)
	}

	// gita rm b: seen at once.
	writeFile(t, reposFile, a+",a,,\r\n")
	if reg := watched(); len(reg.Unregistered) != 0 || !slices.Equal(names(reg.Repos), []string{"a"}) {
		t.Fatalf("after removing b: repos %q unregistered %+v", names(reg.Repos), reg.Unregistered)
	}

	// A registry others can write is refused by the next call, and
	// accepted again once it is the user's alone.
	if err := os.Chmod(reposFile, 0o664); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Watched(); !errs.Is(err, errs.PermissionDeny) {
		t.Fatalf("group-writable registry: %v, want permission_denied", err)
	}
	if err := os.Chmod(reposFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := names(watched().Repos); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after chmod back = %q", got)
	}
}

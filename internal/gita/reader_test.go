package gita

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

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

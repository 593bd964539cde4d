// Package gita reads the repository registry of gita 0.16
// (https://github.com/nosarthur/gita), which is tamq's list of repositories: a
// repo slug is a gita repo name. The registry is read exactly as gita reads it and
// never written: gita owns it, tamq never registers, renames or clones anything.
package gita

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/trust"
)

// The files gita keeps in its directory.
const (
	ReposFileName  = "repos.csv"
	GroupsFileName = "groups.csv"
)

const registerHint = "register repositories with `gita add <path>` (see `gita ls`)"

// Repo is one row of repos.csv.
type Repo struct {
	Name string
	Path string
	// Type is gita's unused third column, kept because gita keeps it.
	Type string
	// RawFlags is the fourth column: git options gita passes to every git
	// command it runs in this repo, space separated.
	RawFlags string
	Flags    []string
	// Bare is set when Path is a bare repository (gita registers those too).
	Bare bool
}

// Group is one row of groups.csv.
type Group struct {
	Name  string
	Repos []string
	// Path is the directory the group was made from ("" in older files).
	Path string
}

// Unregistered is a row of repos.csv that gita does not list, because its path
// is not a git repository (any more). It is kept so status can say why a repo
// has gone.
type Unregistered struct {
	Repo   Repo
	Line   int
	Reason string
}

// Registry is one reading of the registry. It is never changed after Load
// returns it, so callers may keep it and share it.
type Registry struct {
	Dir, ReposFile, GroupsFile string

	Repos        []Repo // registered repos, in file order
	Groups       []Group
	Unregistered []Unregistered
}

// Dir returns the directory gita keeps its registry in, the way gita 0.16
// (gita/common.py get_config_dir) finds it: an empty variable counts as unset.
func Dir(getenv func(string) string) (string, error) {
	if root := getenv("GITA_PROJECT_HOME"); root != "" {
		return filepath.Join(root, "gita"), nil
	}
	if root := getenv("XDG_CONFIG_HOME"); root != "" {
		return filepath.Join(root, "gita"), nil
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "gita"), nil
	}
	return "", errs.New(errs.RegistryError,
		"cannot locate the gita registry: GITA_PROJECT_HOME, XDG_CONFIG_HOME and HOME are all unset or empty").
		WithHint("set HOME (gita reads $HOME/.config/gita), or GITA_PROJECT_HOME to the directory that holds gita/")
}

// Lookup finds a registered repo by its exact name.
func (r *Registry) Lookup(slug string) (Repo, bool) {
	for _, repo := range r.Repos {
		if repo.Name == slug {
			return repo, true
		}
	}
	return Repo{}, false
}

// Slugs returns the names of the registered repos, sorted.
func (r *Registry) Slugs() []string {
	out := make([]string, 0, len(r.Repos))
	for _, repo := range r.Repos {
		out = append(out, repo.Name)
	}
	slices.Sort(out)
	return out
}

// Near returns up to max registered names that look like slug, best first: a
// different case, then names slug begins, then names that contain slug (or
// that slug contains), then names a few typing mistakes away.
func (r *Registry) Near(slug string, max int) []string {
	if max <= 0 || slug == "" {
		return nil
	}
	type candidate struct {
		name       string
		tier, dist int
	}
	want := strings.ToLower(slug)
	wantLen := utf8.RuneCountInString(want)
	// Short slugs are a typo away from almost any short name; allow fewer edits.
	maxDist := min(1+wantLen/4, 3)
	var found []candidate
	for _, repo := range r.Repos {
		name := strings.ToLower(repo.Name)
		dist := editDistance(want, name)
		var tier int
		switch {
		case name == want:
			tier = 0
		case want != "" && strings.HasPrefix(name, want):
			tier = 1
		case wantLen >= 2 && strings.Contains(name, want),
			utf8.RuneCountInString(name) >= 3 && strings.Contains(want, name):
			tier = 2
		case dist <= maxDist:
			tier = 3
		default:
			continue
		}
		found = append(found, candidate{repo.Name, tier, dist})
	}
	slices.SortFunc(found, func(a, b candidate) int {
		if a.tier != b.tier {
			return a.tier - b.tier
		}
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, 0, min(max, len(found)))
	for _, c := range found[:min(max, len(found))] {
		out = append(out, c.name)
	}
	return out
}

// Resolve finds a registered repo or says, in terms a user can act on, why
// there is none.
func (r *Registry) Resolve(slug string) (Repo, error) {
	if repo, ok := r.Lookup(slug); ok {
		return repo, nil
	}
	for _, u := range r.Unregistered {
		if u.Repo.Name == slug {
			return Repo{}, errs.New(errs.UnknownTarget,
				"unknown target '%s': its gita registry entry points to %s, which is not a git repository (%s)",
				slug, u.Repo.Path, u.Reason).
				WithHint("`gita ls` does not list it either; restore the repository at %s, or remove line %d of %s",
					u.Repo.Path, u.Line, r.ReposFile)
		}
	}
	msg := fmt.Sprintf("unknown target '%s': not in the gita registry (see `gita ls`)", slug)
	if near := r.Near(slug, 3); len(near) > 0 {
		msg += "; did you mean " + orList(near) + "?"
	}
	return Repo{}, errs.New(errs.UnknownTarget, "%s", msg).WithHint("%s", registerHint)
}

func orList(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

// editDistance is the optimal string alignment distance over runes: Levenshtein
// plus swapping two neighbours, the commonest typo.
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}

// Reader loads the registry of one gita directory. It is safe for concurrent use.
type Reader struct {
	dir string

	mu     sync.Mutex
	repos  parsed[[]row]
	groups parsed[[]Group]

	// What the files looked like at the last read, and when it was.
	stamps   [2]stamp
	lastRead time.Time
	// gen counts the parses that gave something new: an unchanged gen
	// means the files say what they said.
	gen uint64
	// watched is what Watched last built.
	watched watched

	// What git said of directories without .git, by path: asking it is a
	// process start, and the service loads the registry for every message.
	askedGit map[string]gitAnswer
	// isBare and now are git and the clock (tests replace them).
	isBare func(path string) (bool, string)
	now    func() time.Time
}

// gitAnswer is git's verdict on a directory and the directory's stamp when
// it was given; a changed stamp asks again.
type gitAnswer struct {
	at     stamp
	bare   bool
	reason string
}

// stamp is what stat says of a file; equal stamps mean an unchanged file only
// if the file's last change is well before the read that is being reused (see
// unchangedSince), because file times are coarse.
type stamp struct {
	exists      bool
	size        int64
	ino         uint64
	mtime, ctim unix.Timespec
}

func stampOf(path string) stamp {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return stamp{}
	}
	return stamp{exists: true, size: st.Size, ino: st.Ino, mtime: st.Mtim, ctim: st.Ctim}
}

// racyWindow is how long after a file's last change a read of it is not
// trusted to have seen that change (kernel file times move in coarse ticks),
// the rule git uses for its index ("racy git").
const racyWindow = 2 * time.Second

// unchangedSince reports whether the files are as they were at the last read
// and their last change was long enough before it.
func (rd *Reader) unchangedSince(now [2]stamp) bool {
	if rd.lastRead.IsZero() || now != rd.stamps {
		return false
	}
	for _, st := range now {
		if st.exists && time.Unix(st.ctim.Unix()).After(rd.lastRead.Add(-racyWindow)) {
			return false
		}
	}
	return true
}

// NewReader returns a Reader of the registry in dir (see Dir).
func NewReader(dir string) *Reader {
	return &Reader{dir: dir, isBare: isBare, now: time.Now}
}

// parsed remembers the last parse of one file. The files are re-read on every
// Load and compared byte for byte: an mtime can miss a same-size rewrite within
// one tick of the file system's clock.
type parsed[T any] struct {
	data []byte
	val  T
	err  error
	set  bool
}

// get returns the parse of data, and whether it was parsed anew.
func (p *parsed[T]) get(data []byte, parse func([]byte) (T, error)) (T, error, bool) {
	if p.set && bytes.Equal(p.data, data) {
		return p.val, p.err, false
	}
	p.val, p.err = parse(data)
	p.data, p.set = data, true
	return p.val, p.err, true
}

// row is a syntactically valid line of repos.csv, before the git check.
type row struct {
	repo Repo
	line int
}

// Load reads the registry as it is now. The git check of every path is redone
// each time, since a repository can vanish without repos.csv changing.
func (rd *Reader) Load() (*Registry, error) {
	reg, rows, groups, _, err := rd.read()
	if err != nil {
		return nil, err
	}
	rd.checkRepos(reg, rows, groups)
	return reg, nil
}

// recheckEvery is how long Watched keeps its git checks of the registered
// paths while the registry files stay as they were.
const recheckEvery = time.Second

// watched is a registry Watched built: the parse it came from (gen) and
// when its paths were checked.
type watched struct {
	reg     *Registry
	gen     uint64
	checked time.Time
}

// Watched is Load for a caller that reads the registry on every request (the
// service checks every send's address against it): the registry files are
// watched through what stat says of them (size, inode, times), and the git
// check of the registered paths, two stats each, is redone only when the
// files say something new, or after recheckEvery. So a repository
// registered or unregistered in gita (which rewrites repos.csv) is seen by
// the next call, a registry others can write is refused as Load refuses it,
// and a repository deleted behind gita's back is seen within recheckEvery.
// The Registry is shared by the calls that get it, never changed.
func (rd *Reader) Watched() (*Registry, error) {
	reg, rows, groups, gen, err := rd.read()
	if err != nil {
		return nil, err
	}
	now := rd.now()
	rd.mu.Lock()
	w := rd.watched
	rd.mu.Unlock()
	if w.reg != nil && w.gen == gen && !now.Before(w.checked) && now.Sub(w.checked) < recheckEvery {
		return w.reg, nil
	}
	rd.checkRepos(reg, rows, groups)
	rd.mu.Lock()
	// A slower call that read an older parse must not replace a newer one.
	if rd.watched.reg == nil || gen >= rd.watched.gen {
		rd.watched = watched{reg: reg, gen: gen, checked: now}
	}
	rd.mu.Unlock()
	return reg, nil
}

// read returns the registry's parsed rows and groups, reading the files again
// only when their stamps changed or are too recent to trust, with reg's file
// names filled in; gen is the parse's generation (see Reader.gen).
func (rd *Reader) read() (reg *Registry, rows []row, groups []Group, gen uint64, err error) {
	reg = &Registry{
		Dir:        rd.dir,
		ReposFile:  filepath.Join(rd.dir, ReposFileName),
		GroupsFile: filepath.Join(rd.dir, GroupsFileName),
	}
	stamps := [2]stamp{stampOf(reg.ReposFile), stampOf(reg.GroupsFile)}
	rd.mu.Lock()
	fresh := rd.repos.set && rd.groups.set && rd.unchangedSince(stamps)
	rows, rowsErr := rd.repos.val, rd.repos.err
	groups, groupsErr := rd.groups.val, rd.groups.err
	gen = rd.gen
	rd.mu.Unlock()
	if !fresh {
		// Stat before reading: a change after the stat shows in the next stat.
		readAt := time.Now()
		// The registry says which directory is which repo, so where
		// prompts and messages are typed: files another user could write
		// are refused.
		reposData, err := trust.ReadFile(reg.ReposFile, "gita registry")
		if errs.Is(err, errs.PermissionDeny) {
			return nil, nil, nil, 0, err
		}
		if err != nil {
			return nil, nil, nil, 0, missingOrUnreadable(rd.dir, reg.ReposFile, err)
		}
		groupsData, err := trust.ReadFile(reg.GroupsFile, "gita registry")
		if errors.Is(err, fs.ErrNotExist) {
			// gita creates groups.csv only when a group is made.
			groupsData, err = nil, nil
		}
		if errs.Is(err, errs.PermissionDeny) {
			return nil, nil, nil, 0, err
		}
		if err != nil {
			return nil, nil, nil, 0, unreadable(reg.GroupsFile, err)
		}
		rd.mu.Lock()
		var newRows, newGroups bool
		rows, rowsErr, newRows = rd.repos.get(reposData, func(b []byte) ([]row, error) { return parseRepos(reg.ReposFile, b) })
		groups, groupsErr, newGroups = rd.groups.get(groupsData, func(b []byte) ([]Group, error) { return parseGroups(reg.GroupsFile, b) })
		if newRows || newGroups {
			rd.gen++
		}
		gen = rd.gen
		rd.stamps, rd.lastRead = stamps, readAt
		rd.mu.Unlock()
	}
	if rowsErr != nil {
		return nil, nil, nil, 0, rowsErr
	}
	if groupsErr != nil {
		return nil, nil, nil, 0, groupsErr
	}
	return reg, rows, groups, gen, nil
}

// checkRepos fills reg from the parsed rows and groups, checking that each
// registered path is a git repository.
func (rd *Reader) checkRepos(reg *Registry, rows []row, groups []Group) {
	for _, g := range groups {
		g.Repos = slices.Clone(g.Repos)
		reg.Groups = append(reg.Groups, g)
	}
	for _, r := range rows {
		repo := r.repo
		repo.Flags = slices.Clone(repo.Flags)
		bare, reason := checkGit(repo.Path, rd.askGit)
		if reason != "" {
			reg.Unregistered = append(reg.Unregistered, Unregistered{Repo: repo, Line: r.line, Reason: reason})
			continue
		}
		repo.Bare = bare
		reg.Repos = append(reg.Repos, repo)
	}
}

func missingOrUnreadable(dir, file string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return unreadable(file, err)
	}
	if _, statErr := os.Stat(dir); errors.Is(statErr, fs.ErrNotExist) {
		return errs.New(errs.RegistryError, "gita registry directory %s does not exist", dir).
			WithHint("%s", registerHint)
	}
	return errs.New(errs.RegistryError, "gita registry %s does not exist", file).
		WithHint("%s", registerHint)
}

func unreadable(file string, err error) error {
	e := errs.New(errs.RegistryError, "cannot read gita registry %s: %s", file, describeErr(err))
	e.Err = err
	return e.WithHint("check that %s is a readable file", file)
}

// checkGit decides, as gita's utils.is_git(path, include_bare=True) does, whether
// path is a git repository: it has a .git entry (a directory, or a file for
// worktrees and submodules), or it is a bare repository according to git. A
// non-empty reason says why it is not.
func checkGit(path string, askGit func(string) (bool, string)) (bare bool, reason string) {
	// gita resolves a relative path against its own working directory, which
	// for a daemon is arbitrary; gita itself only ever writes absolute paths.
	if !filepath.IsAbs(path) {
		return false, "path is not absolute"
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, "path does not exist"
	}
	if err != nil {
		return false, "cannot inspect path: " + describeErr(err)
	}
	if _, err := os.Stat(filepath.Join(path, ".git")); err == nil {
		return false, ""
	}
	if !info.IsDir() {
		return false, "path is not a directory"
	}
	return askGit(path)
}

// askGit asks git whether the directory at path is a bare repository,
// once for as long as the directory stays as it was (a bare repository's
// HEAD is replaced by a rename, which changes the directory), and not when
// it changed too recently to tell (racyWindow).
func (rd *Reader) askGit(path string) (bare bool, reason string) {
	now := stampOf(path)
	rd.mu.Lock()
	seen, ok := rd.askedGit[path]
	rd.mu.Unlock()
	if ok && seen.at == now && rd.now().Sub(time.Unix(now.ctim.Unix())) > racyWindow {
		return seen.bare, seen.reason
	}
	bare, reason = rd.isBare(path)
	rd.mu.Lock()
	if rd.askedGit == nil {
		rd.askedGit = make(map[string]gitAnswer)
	}
	rd.askedGit[path] = gitAnswer{at: now, bare: bare, reason: reason}
	rd.mu.Unlock()
	return bare, reason
}

// isBare runs git in path to ask whether it is a bare repository.
func isBare(path string) (bare bool, reason string) {
	cmd := exec.Command("git", "rev-parse", "--is-bare-repository")
	cmd.Dir = path
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	switch {
	case err == nil && string(out) == "true\n":
		return true, ""
	case err == nil || errors.As(err, &exitErr):
		return false, "no .git and not a bare repository"
	default:
		return false, "no .git, and cannot run git to look for a bare repository: " + err.Error()
	}
}

// gitEnv drops the variables that would make git answer about another
// repository than the one in its working directory (set when tamq runs from a
// git hook, for instance).
func gitEnv() []string {
	env := os.Environ()
	return slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM":
			return true
		}
		return false
	})
}

// describeErr drops the path from err, for messages that already name it.
func describeErr(err error) string {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err.Error()
	}
	return err.Error()
}

// parseRepos reads repos.csv as gita does (csv.DictReader with the field names
// path,name,type,flags and "" for missing ones), but refuses what gita would
// misread silently: a row without a path or name, extra fields, a name used
// twice (gita would keep only the last) and broken quoting. It also refuses
// what gita takes but tamq must not: a name that could act in a terminal (a
// name is typed into agents' terminals as a sender and printed by every
// command) and a path with a control character, which no repository tamq
// opens a window in has.
func parseRepos(file string, data []byte) ([]row, error) {
	var rows []row
	firstLine := map[string]int{}
	err := readCSV(file, data, ',', func(rec []string, line int) error {
		if len(rec) < 2 || len(rec) > 4 {
			return lineError(file, line, "row has %d %s, want path,name[,type,flags]", len(rec), plural(len(rec), "field"))
		}
		rec = append(rec, "", "")[:4]
		repo := Repo{Path: rec[0], Name: rec[1], Type: rec[2], RawFlags: rec[3], Flags: strings.Fields(rec[3])}
		switch {
		case repo.Path == "":
			return lineError(file, line, "empty path")
		case repo.Name == "":
			return lineError(file, line, "empty name")
		}
		if p := textsafe.NameProblem(repo.Name); p != "" {
			return lineError(file, line, "name '%s' cannot be used: %s", textsafe.Escape(repo.Name), p)
		}
		if p := textsafe.ControlProblem(repo.Path); p != "" {
			return lineError(file, line, "path '%s' cannot be used: %s", textsafe.Escape(repo.Path), p)
		}
		if first, dup := firstLine[repo.Name]; dup {
			return lineError(file, line, "duplicate name '%s' (first on line %d)", repo.Name, first)
		}
		firstLine[repo.Name] = line
		rows = append(rows, row{repo: repo, line: line})
		return nil
	})
	return rows, err
}

// parseGroups reads groups.csv, whose rows are name:repos[:path] with the repo
// names space separated; older gita wrote no path. Group and repo names follow
// the rule of repos.csv (see parseRepos).
func parseGroups(file string, data []byte) ([]Group, error) {
	var groups []Group
	firstLine := map[string]int{}
	err := readCSV(file, data, ':', func(rec []string, line int) error {
		if len(rec) > 3 {
			return lineError(file, line, "row has %d fields, want name:repos[:path]", len(rec))
		}
		rec = append(rec, "", "")[:3]
		g := Group{Name: rec[0], Repos: strings.Fields(rec[1]), Path: rec[2]}
		if g.Name == "" {
			return lineError(file, line, "empty group name")
		}
		if p := textsafe.NameProblem(g.Name); p != "" {
			return lineError(file, line, "group name '%s' cannot be used: %s", textsafe.Escape(g.Name), p)
		}
		for _, name := range g.Repos {
			if p := textsafe.NameProblem(name); p != "" {
				return lineError(file, line, "repo name '%s' in group '%s' cannot be used: %s", textsafe.Escape(name), g.Name, p)
			}
		}
		if p := textsafe.ControlProblem(g.Path); p != "" {
			return lineError(file, line, "group path '%s' cannot be used: %s", textsafe.Escape(g.Path), p)
		}
		if first, dup := firstLine[g.Name]; dup {
			return lineError(file, line, "duplicate group '%s' (first on line %d)", g.Name, first)
		}
		firstLine[g.Name] = line
		groups = append(groups, g)
		return nil
	})
	return groups, err
}

// readCSV calls fn for each record with the line it starts on. Like Python's
// csv module it skips blank lines and takes CRLF or LF line ends.
func readCSV(file string, data []byte, comma rune, fn func(rec []string, line int) error) error {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = comma
	r.FieldsPerRecord = -1
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return errs.Wrap(errs.RegistryError, err, "cannot read gita registry %s", file)
			}
			switch {
			case errors.Is(pe.Err, csv.ErrQuote):
				// Reported where the quoted field began: that is the line to fix,
				// even if the parser only noticed lines later.
				return lineError(file, pe.StartLine, `quoted field not closed, or text after its closing "`)
			case errors.Is(pe.Err, csv.ErrBareQuote):
				return lineError(file, pe.Line, `" inside an unquoted field (quote the field and double the ")`)
			default:
				return lineError(file, pe.Line, "%v", pe.Err)
			}
		}
		line, _ := r.FieldPos(0)
		if err := fn(rec, line); err != nil {
			return err
		}
	}
}

func lineError(file string, line int, format string, args ...any) *errs.Error {
	return errs.New(errs.RegistryError, "%s:%d: %s", file, line, fmt.Sprintf(format, args...)).
		WithHint("fix or delete line %d of %s (see `gita ls`)", line, file)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
